"""Output hygiene: what a proof printed or recorded, before it becomes evidence.

:func:`redact_secrets` masks secret-looking text (password hashes, private key blocks, ``*_KEY=``/token
strings) and :func:`safe_text` redacts and caps; the verdict and the report pass everything a proof
printed or recorded through them before it becomes evidence.
"""

from __future__ import annotations

import re
from typing import Literal

_KEY_NAME = r"[A-Z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIALS?|AUTH)[A-Z0-9_]*"
_KEY_NAME_LOWER = (
    r"(?:api|access|secret|private|client|auth|session|refresh|bearer)[_-]?(?:key|secret|token)|password|passwd|passphrase|token"
)
_SECRET_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # PEM / OpenSSH / PGP private key blocks, to their END line or, when the text was cut, to its end
    (
        re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----|\Z)", re.S),
        "[redacted: private key]",
    ),
    # crypt(3) password hashes as in /etc/shadow: $1$ $2b$ $5$ $6$ $7$ $y$ (yescrypt) $gy$ ...
    (re.compile(r"\$(?:1|2[abxy]?|5|6|7|y|gy|sha1|md5)\$[./A-Za-z0-9$=]{4,}"), "[redacted: password hash]"),
    # a shadow line with an old DES hash: user:<13 chars>:<last change>:
    (re.compile(r"\b([a-z_][a-z0-9_.-]*):[./A-Za-z0-9]{13}:(\d{0,6}):"), r"\1:[redacted: password hash]:\2:"),
    # NAME=value / "NAME": "value" where the name says it is a secret (env dumps, .env files, dict reprs)
    (re.compile(rf"\b({_KEY_NAME})(['\"]?\s*[=:]\s*)(['\"]?)[^\s'\",;}}]+"), r"\1\2\3[redacted]"),
    (re.compile(rf"(?i)\b({_KEY_NAME_LOWER})(['\"]?\s*[=:]\s*)(['\"]?)[A-Za-z0-9_\-./+=~]{{8,}}"), r"\1\2\3[redacted]"),
    # tokens recognisable by their form
    (re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/-]{16,}=*"), "Bearer [redacted]"),
    (re.compile(r"\b(?:sk|rk|pk)-[A-Za-z0-9_-]{20,}"), "[redacted: token]"),
    (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|hf_[A-Za-z0-9]{30,})"), "[redacted: token]"),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), "[redacted: token]"),
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), "[redacted: token]"),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{30,}"), "[redacted: token]"),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"), "[redacted: token]"),
)


def redact_secrets(text: str) -> str:
    """Mask secret-looking content: password hashes, private key blocks, ``*_KEY=``/``password:`` values, tokens.

    A filter on proof output, behind the sandbox (which already shows no secret of the host): whatever a
    proof read and printed must not reach reports, tables or Dagster's event log as it was.
    """
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def cap_text(text: str, limit: int, *, keep: Literal["head", "tail"] = "head") -> str:
    """``text`` cut to at most ``limit`` characters, a marker saying how much was left out (idempotent)."""
    if len(text) <= limit:
        return text
    template = "[... {} chars cut]"
    room = max(0, limit - len(template.format(len(text))) - 1)
    marker = template.format(len(text) - room)
    return f"{text[:room]} {marker}" if keep == "head" else f"{marker} {text[len(text) - room :]}"


def safe_text(text: object, limit: int, *, keep: Literal["head", "tail"] = "head") -> str:
    """Redact, then cap: the form in which proof output may become evidence."""
    return cap_text(redact_secrets(str(text)), limit, keep=keep)
