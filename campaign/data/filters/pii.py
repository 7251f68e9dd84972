"""PII redaction in kept text: email addresses, public IP addresses and phone numbers replaced by placeholders.

As datatrove's PIIFormatter (`pipeline/formatters/pii.py`): its email regex and its IPv4 regex with the same
validator (`ipaddress`, only global addresses: private, loopback and documentation addresses stay). Where campaign
differs (docs/prepare.md, "PII redaction"):
* the email regex is matched case-insensitively (datatrove's `[a-z0-9...]` leaves "John.Doe@" as "John." plus a
  replaced tail);
* one placeholder per kind (datatrove cycles through two emails and six made-up IPs, which hides that a text was
  redacted and makes the output depend on the order documents were seen);
* IPv6 addresses (global ones, by the same validator) and phone numbers are replaced too; datatrove has neither.
  A phone number is an international number ("+" and 7 to 15 digits, spaces, dots, hyphens or one parenthesised
  area code between) or a North American one ("(555) 123-4567", "555-123-4567", "555.123.4567").
Only counts per kind leave this module (the shard summary, the manifest): a matched value is never logged.

Source: huggingface/datatrove 0.10.1 `pipeline/formatters/pii.py`; ITU-T E.164 (at most 15 digits).
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter

from campaign.config import PiiConfig

EMAIL = "email"
IP_ADDRESS = "ip_address"
PHONE_NUMBER = "phone_number"
PII_KINDS = (EMAIL, IP_ADDRESS, PHONE_NUMBER)

_EMAIL = re.compile(
    r"\b[a-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*@(?:(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+"
    r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?|\[(?:(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\.){3}(?:25[0-5]|2[0-4][0-9]|"
    r"[01]?[0-9][0-9]?|[a-z0-9-]*[a-z0-9]:)])",
    re.IGNORECASE,
)
_IPV4 = re.compile(
    r"(?:(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\.){3}(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)"
)
# A run of hex digits and colons with at least two colons, not inside a word or a longer such run; `ipaddress`
# decides whether it is an address (a time such as 12:30:45 is not).
_IPV6 = re.compile(r"(?<![\w:.])(?:[0-9a-f]{0,4}:){2,7}[0-9a-f]{0,4}(?![\w:])", re.IGNORECASE)
_PHONE = re.compile(
    r"(?<![\w+])\+\d{1,3}(?:[ .-]?\(\d{1,4}\))?(?:[ .-]?\d{1,5}){2,5}(?![\w])"
    r"|(?<![\w(])(?:\(\d{3}\) ?|\d{3}[.-])\d{3}[.-]\d{4}(?!\w)"
)
# The same patterns with a consumed first character before each look-behind, so the regex engine skips ahead to
# the characters a match can start with instead of trying the look-behind at every position (4-10x faster on
# prepare's corpus); a unit test holds them to the plain ones above.
_PHONE_FAST = re.compile(
    r"\+(?<![\w+]\+)\d{1,3}(?:[ .-]?\(\d{1,4}\))?(?:[ .-]?\d{1,5}){2,5}(?![\w])"
    r"|\((?<![\w(]\()\d{3}\) ?\d{3}[.-]\d{4}(?!\w)"
    r"|\d(?<![\w(]\d)\d{2}[.-]\d{3}[.-]\d{4}(?!\w)"
)
_DIGIT_DOT_RUN = re.compile(r"[\d.]{7,}")  # an IPv4 address is digits and dots only, at least 7 of them
_SPACES = (" ", "\n", "\t")
_COLON_PAIR = re.compile(r":[0-9a-f]{0,4}:", re.IGNORECASE)  # in every IPv6 match; starts with a literal
_HEX_COLON = frozenset("0123456789abcdefABCDEF:")


def _is_global_ip(value: str) -> bool:
    try:
        return ipaddress.ip_address(value).is_global
    except ValueError:
        return False


def _phone_digits_ok(value: str) -> bool:
    return 7 <= sum(ch.isdigit() for ch in value) <= 15


def _email_matches(text: str) -> list[re.Match[str]]:
    """The matches of the email regex, searched only in the whitespace-delimited pieces that hold an "@" (a match
    holds no whitespace; `pattern.finditer(text, pos, endpos)` sees the real character before `pos` for `\b`)."""
    found: list[re.Match[str]] = []
    at = text.find("@")
    while at >= 0:
        low = max(0, at - 512)  # a local part is at most 64 characters
        left = max(text.rfind(c, low, at) for c in _SPACES) + 1 or low
        ends = [e for e in (text.find(c, at) for c in _SPACES) if e >= 0]
        right = min(ends) if ends else len(text)
        found += _EMAIL.finditer(text, left, right)
        at = text.find("@", right)
    return found


def _ipv4_matches(text: str) -> list[re.Match[str]]:
    """The matches of the IPv4 regex (digits and dots only, no look-around), searched only in runs of them."""
    return [m for run in _DIGIT_DOT_RUN.finditer(text) for m in _IPV4.finditer(text, run.start(), run.end())]


def _ipv6_matches(text: str) -> list[re.Match[str]]:
    """The matches of the IPv6 regex, searched only in the runs of hex digits and colons around a pair of colons;
    the search ends one character past the run, so the look-ahead sees the real next character."""
    found: list[re.Match[str]] = []
    pos = 0
    while (hit := _COLON_PAIR.search(text, pos)) is not None:
        left = hit.start()
        while left > 0 and text[left - 1] in _HEX_COLON and hit.start() - left < 64:
            left -= 1
        right = hit.end()
        while right < len(text) and text[right] in _HEX_COLON:
            right += 1
        found += _IPV6.finditer(text, left, min(right + 1, len(text)))
        pos = right + 1
    return found


def _replace(text: str, matches, valid, placeholder: str) -> tuple[str, int]:
    parts: list[str] = []
    last = n = 0
    for match in matches:
        if valid is not None and not valid(match.group(0)):
            continue
        parts += (text[last : match.start()], placeholder)
        last = match.end()
        n += 1
    if not n:
        return text, 0
    parts.append(text[last:])
    return "".join(parts), n


def redact_pii(text: str, cfg: PiiConfig) -> tuple[str, Counter[str]]:
    """(text with each match replaced by its placeholder, replacements by kind). Kinds are replaced one after the
    other (emails, IP addresses, phone numbers), each on the text the previous one left."""
    counts: Counter[str] = Counter()
    n = 0
    if cfg.emails and "@" in text:
        text, n = _replace(text, _email_matches(text), None, cfg.email_placeholder)
        counts[EMAIL] += n
    if cfg.ip_addresses:
        text, n = _replace(text, _ipv4_matches(text), _is_global_ip, cfg.ip_placeholder)
        counts[IP_ADDRESS] += n
        if "::" in text or text.count(":") >= 7:
            text, n = _replace(text, _ipv6_matches(text), _is_global_ip, cfg.ip_placeholder)
            counts[IP_ADDRESS] += n
    if cfg.phone_numbers:
        text, n = _replace(text, _PHONE_FAST.finditer(text), _phone_digits_ok, cfg.phone_placeholder)
        counts[PHONE_NUMBER] += n
    return text, +counts


def redact_pii_plain(text: str, cfg: PiiConfig) -> tuple[str, Counter[str]]:
    """`redact_pii` with each regex run over the whole text: the reference the fast paths are tested against."""
    counts: Counter[str] = Counter()

    def sub(pattern: re.Pattern[str], kind: str, placeholder: str, valid, text: str) -> str:
        def replace(match: re.Match[str]) -> str:
            value = match.group(0)
            if valid is not None and not valid(value):
                return value
            counts[kind] += 1
            return placeholder

        return pattern.sub(replace, text)

    if cfg.emails:
        text = sub(_EMAIL, EMAIL, cfg.email_placeholder, None, text)
    if cfg.ip_addresses:
        text = sub(_IPV4, IP_ADDRESS, cfg.ip_placeholder, _is_global_ip, text)
        text = sub(_IPV6, IP_ADDRESS, cfg.ip_placeholder, _is_global_ip, text)
    if cfg.phone_numbers:
        text = sub(_PHONE, PHONE_NUMBER, cfg.phone_placeholder, _phone_digits_ok, text)
    return text, counts
