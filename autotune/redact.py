"""Secrets never reach records, the tool's own output, or reports.

`SECRET_FLAGS` are flags whose value is a secret; `secret_values(argv, env)` collects the
values to scrub; `redact_argv` and `redact_text` replace them with `***`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

SECRET_FLAGS = ("--api-key", "--admin-api-key", "--hf-token", "--ssl-keyfile-password")
_SECRET_ENV = re.compile(r"(TOKEN|SECRET|PASSWORD|API_KEY|APIKEY|_KEY$)", re.I)
MASK = "***"


def secret_values(argv: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
    found: list[str] = []
    for i, arg in enumerate(argv):
        for flag in SECRET_FLAGS:
            if arg == flag and i + 1 < len(argv):
                found.append(argv[i + 1])
            elif arg.startswith(flag + "="):
                found.append(arg.split("=", 1)[1])
    for key, value in (env or {}).items():
        if _SECRET_ENV.search(key) and value:
            found.append(value)
    return [s for s in found if len(s) >= 4]


def redact_argv(argv: Sequence[str]) -> list[str]:
    out = list(argv)
    for i, arg in enumerate(out):
        if arg in SECRET_FLAGS and i + 1 < len(out):
            out[i + 1] = MASK
        for flag in SECRET_FLAGS:
            if arg.startswith(flag + "="):
                out[i] = f"{flag}={MASK}"
    return out


def redact_text(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, MASK)
    return text
