"""Secrets never reach records, the tool's own output, or reports.

`SECRET_FLAGS` are flags whose value is a secret; `secret_values(argv, env)` collects the
values to scrub; `redact_argv` and `redact_text` replace them with `***`; `redact_url` masks a
URL's password.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from functools import cache

SECRET_FLAGS = ("--api-key", "--admin-api-key", "--hf-token", "--ssl-keyfile-password")
_SECRET_ENV = re.compile(r"(TOKEN|SECRET|PASSWORD|API_KEY|APIKEY|_KEY$)", re.I)
MASK = "***"


def secret_values(argv: Sequence[str], env: Mapping[str, str] | None = None,
                  options: Collection[str] | None = None) -> list[str]:
    """The secret values in `argv` (after a secret flag, abbreviated or not) and in `env`."""
    found = [value for _, _, value in _secret_args(argv, options)]
    for key, value in (env or {}).items():
        if is_secret_env(key) and value:
            found.append(value)
    return [s for s in found if len(s) >= 4]


def is_secret_env(name: str) -> bool:
    """An environment variable whose value is a secret by its name (HF_TOKEN, OPENAI_API_KEY, ...)."""
    return _SECRET_ENV.search(name) is not None


def redact_argv(argv: Sequence[str], options: Collection[str] | None = None) -> list[str]:
    """`argv` with every secret flag's value masked. Flags are resolved as the engine's
    argparse resolves them (`options`: its flag table; default: every shipped table), so an
    abbreviation (`--api-k s3cret`) is masked like the full spelling."""
    out = list(argv)
    for i, flag, _ in _secret_args(argv, options):
        out[i] = f"{flag}={MASK}" if "=" in out[i] else MASK
    return out


def _secret_args(argv: Sequence[str], options: Collection[str] | None) -> list[tuple[int, str, str]]:
    """(index of the value's token, the flag as written, value) for each secret flag in argv."""
    known = _all_options() if options is None else frozenset(options)
    found = []
    for i, arg in enumerate(argv):
        if not arg.startswith("--"):
            continue
        flag, eq, value = arg.partition("=")
        if not _is_secret(flag, known):
            continue
        if eq:
            found.append((i, flag, value))
        elif i + 1 < len(argv):
            found.append((i + 1, flag, argv[i + 1]))
    return found


def _is_secret(flag: str, known: frozenset[str]) -> bool:
    """`flag` names a secret option: exactly, or as an abbreviation argparse would take for one.
    An ambiguous abbreviation counts as secret when any option it could mean is (masking too
    much costs nothing; argparse rejects it anyway)."""
    if flag in SECRET_FLAGS:
        return True
    if flag in known or len(flag) < 3:
        return False
    return any(opt.startswith(flag) for opt in SECRET_FLAGS)


@cache
def _all_options() -> frozenset[str]:
    from autotune import flagtable

    return frozenset(opt for engine, version in flagtable.available() for opt in flagtable.load(engine, version).options())


def redact_text(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, MASK)
    return text


def redact_url(url: str) -> str:
    """`url` with its password masked (`user:***@host`); `user@host` as it was where there is none."""
    if "@" not in url or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    creds, host = rest.rsplit("@", 1)
    user, colon, _ = creds.partition(":")
    return f"{scheme}://{user}{':' + MASK if colon else ''}@{host}"
