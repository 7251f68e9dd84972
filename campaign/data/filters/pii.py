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


def _is_global_ip(value: str) -> bool:
    try:
        return ipaddress.ip_address(value).is_global
    except ValueError:
        return False


def _phone_digits_ok(value: str) -> bool:
    return 7 <= sum(ch.isdigit() for ch in value) <= 15


def redact_pii(text: str, cfg: PiiConfig) -> tuple[str, Counter[str]]:
    """(text with each match replaced by its placeholder, replacements by kind)."""
    counts: Counter[str] = Counter()

    def sub(pattern: re.Pattern[str], kind: str, placeholder: str, valid, text: str) -> str:
        def replace(match: re.Match[str]) -> str:
            value = match.group(0)
            if valid is not None and not valid(value):
                return value
            counts[kind] += 1
            return placeholder

        return pattern.sub(replace, text)

    if cfg.emails and "@" in text:
        text = sub(_EMAIL, EMAIL, cfg.email_placeholder, None, text)
    if cfg.ip_addresses:
        text = sub(_IPV4, IP_ADDRESS, cfg.ip_placeholder, _is_global_ip, text)
        if "::" in text or text.count(":") >= 7:
            text = sub(_IPV6, IP_ADDRESS, cfg.ip_placeholder, _is_global_ip, text)
    if cfg.phone_numbers:
        text = sub(_PHONE, PHONE_NUMBER, cfg.phone_placeholder, _phone_digits_ok, text)
    return text, counts
