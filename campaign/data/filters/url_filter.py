"""URL and domain block lists for sources that carry a URL (`data.sources[].url_field`).

Three lists, each a UTF-8 file with one rule a line (blank lines and lines starting with '#' are skipped):
* domains: a document is removed when its URL's host is a listed domain or a subdomain of one ("example.com" blocks
  "www.example.com", not "badexample.com"), compared in lowercase without a trailing dot, as datatrove's URLFilter
  and the UT1 lists FineWeb used match domains;
* substrings: removed when the lowercased URL contains the rule;
* regexes: removed when the rule matches anywhere in the URL. Rules run on RE2 (google-re2), an engine without
  backtracking whose time is linear in the URL's length whatever the rule (`(a+)+$` cannot hang a prepare). Its
  syntax is Python's without backreferences and look-around: a rule that needs them cannot be bounded, and is
  refused at load like one that does not compile, as is a rule too large for RE2's memory bound.
The reason names the list and the matched rule with its file and line. A document without a URL is kept. A rule
that does not compile, or a list that cannot be read, is a DataError naming file:line and the fix.

Source: FineWeb (Penedo et al. 2024, arXiv 2406.17557, sec. 3): the UT1 block list; huggingface/datatrove 0.10.1
`pipeline/filters/url_filter.py`.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import re2

from campaign.config import UrlFilterConfig
from campaign.data.filters.base import Rejection
from campaign.errors import DataError

# Reason codes
URL_BLOCKED_DOMAIN = "url_blocked_domain"
URL_BLOCKED_SUBSTRING = "url_blocked_substring"
URL_BLOCKED_REGEX = "url_blocked_regex"
URL_REASONS = (URL_BLOCKED_DOMAIN, URL_BLOCKED_SUBSTRING, URL_BLOCKED_REGEX)

_HOST = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)


@dataclass(frozen=True)
class UrlRules:
    """The block lists as read: each rule with where it was written (file:line)."""

    domains: dict[str, str]  # domain -> where
    substrings: tuple[tuple[str, str], ...]  # (lowercased substring, where)
    regexes: tuple[tuple[re2._Regexp, str], ...]  # (compiled rule, where)

    def __len__(self) -> int:
        return len(self.domains) + len(self.substrings) + len(self.regexes)


def _rule_lines(path: str, field: str) -> list[tuple[str, str]]:
    """(rule, "file:line") of the file's rules."""
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except OSError as exc:
        raise DataError(
            f"cannot read the URL block list: {exc.strerror or exc}",
            where=f"{path} (data.cleaning.url_filter.{field})",
            fix=f"check the path of data.cleaning.url_filter.{field} (relative to the config file)",
        ) from None
    except UnicodeDecodeError as exc:
        line = text_line(Path(path).read_bytes(), exc.start)
        raise DataError(
            f"the URL block list is not UTF-8 (byte {exc.start})",
            where=f"{path}:{line}",
            fix="save the list as UTF-8 text, one rule a line",
        ) from None
    rules = []
    for number, raw in enumerate(text.splitlines(), 1):
        rule = raw.strip()
        if rule and not rule.startswith("#"):
            rules.append((rule, f"{path}:{number}"))
    return rules


def text_line(data: bytes, offset: int) -> int:
    """1-based line of a byte offset."""
    return data.count(b"\n", 0, offset) + 1


def _normal_domain(rule: str) -> str:
    rule = rule.lower().rstrip(".")
    if _HOST.match(rule):
        rule = urlsplit(rule).hostname or rule
    return rule.removeprefix("*.").removeprefix(".")


def load_url_rules(cfg: UrlFilterConfig) -> UrlRules:
    """Read and check the block lists (cached per process while the files are unchanged)."""
    stamps = tuple(
        (path, _stamp(path)) for path in (cfg.domains_file, cfg.substrings_file, cfg.regexes_file) if path
    )
    return _load(cfg.domains_file, cfg.substrings_file, cfg.regexes_file, stamps)


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


@functools.lru_cache(maxsize=4)
def _load(
    domains_file: str | None, substrings_file: str | None, regexes_file: str | None, _stamps
) -> UrlRules:
    domains: dict[str, str] = {}
    if domains_file:
        for rule, where in _rule_lines(domains_file, "domains_file"):
            domains.setdefault(_normal_domain(rule), where)
    substrings = (
        tuple((rule.lower(), where) for rule, where in _rule_lines(substrings_file, "substrings_file"))
        if substrings_file
        else ()
    )
    regexes = [
        (bounded_regex(rule, f"{where} (data.cleaning.url_filter.regexes_file)"), where)
        for rule, where in (_rule_lines(regexes_file, "regexes_file") if regexes_file else ())
    ]
    return UrlRules(domains, substrings, tuple(regexes))


RE2_MAX_MEM = 8 << 20  # bytes of compiled program per rule: a rule larger than this is refused


def bounded_regex(rule: str, where: str) -> re2._Regexp:
    """A user's regular expression compiled for RE2 (linear time, no backtracking); DataError naming `where` (file:line
    or the field) when it does not compile, or needs backtracking (backreferences, look-around) and so cannot be
    bounded."""
    options = re2.Options()
    options.log_errors = False
    options.max_mem = RE2_MAX_MEM
    try:
        re.compile(rule)
    except re.error as exc:
        raise DataError(
            f"rule {rule!r} is not a valid regular expression: {exc}",
            where=where,
            fix="fix or remove the line (Python `re` syntax; escape a literal '.' as '\\.')",
        ) from None
    except RecursionError:
        raise DataError(
            f"rule {rule[:80]!r}... is nested too deeply", where=where, fix="simplify the rule"
        ) from None
    try:
        return re2.compile(rule, options)
    except re2.error as exc:
        detail = (
            exc.args[0].decode("utf-8", "replace")
            if exc.args and isinstance(exc.args[0], bytes)
            else str(exc)
        )
        raise DataError(
            f"rule {rule!r} cannot be run in bounded time ({detail}): campaign runs user rules on RE2, which never "
            "backtracks, so backreferences and look-around are not available and a rule must fit in "
            f"{RE2_MAX_MEM >> 20} MiB once compiled",
            where=where,
            fix="rewrite the rule without backreferences or look-around (or split it into smaller rules)",
        ) from None


def url_host(url: str) -> str:
    """The URL's host, lowercased without a trailing dot ('' when it has none)."""
    if not _HOST.match(url):
        url = "//" + url  # "example.com/page" is read as a host and a path
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:  # an unbalanced '[' in the host
        return ""
    return host.rstrip(".")


def check_url(url: str | None, rules: UrlRules) -> Rejection | None:
    """The first block rule the URL meets (domains, then substrings, then regexes), or None."""
    if not url:
        return None
    if rules.domains:
        host = url_host(url)
        parts = host.split(".")
        for i in range(len(parts)):
            where = rules.domains.get(".".join(parts[i:]))
            if where is not None:
                return Rejection(URL_BLOCKED_DOMAIN, f"{'.'.join(parts[i:])} ({where}) blocks {host}")
    if rules.substrings:
        lower = url.lower()
        for rule, where in rules.substrings:
            if rule in lower:
                return Rejection(URL_BLOCKED_SUBSTRING, f"{rule!r} ({where})")
    for pattern, where in rules.regexes:
        if pattern.search(url):
            return Rejection(URL_BLOCKED_REGEX, f"{pattern.pattern!r} ({where})")
    return None
