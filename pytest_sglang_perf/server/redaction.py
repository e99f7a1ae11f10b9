"""Keeping secrets (the API key, `--admin-api-key`) out of everything the plugin echoes or writes."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

REDACTED = "***"
SECRET_FLAGS = ("--api-key", "--admin-api-key")
SECRET_NAME_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD")
"""An environment variable whose name holds one of these is a secret (HF_TOKEN, SGLANG_PERF_API_KEY)."""


def is_secret_flag(arg: str) -> bool:
    """`--api-key` and `--admin-api-key`, also as the unique prefixes argparse accepts (`--api-k`)."""
    return len(arg) >= 4 and any(flag.startswith(arg) for flag in SECRET_FLAGS)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """`env` with the value of every secret-named variable replaced by '***'."""
    return {name: REDACTED if any(word in name.upper() for word in SECRET_NAME_WORDS) else value
            for name, value in env.items()}


def redact_argv(argv: Sequence[str]) -> list[str]:
    """argv with the value of every secret flag (`--api-key K`, `--api-key=K`) replaced by '***'."""
    out: list[str] = []
    for arg in argv:
        flag, eq, _ = arg.partition("=")
        if out and is_secret_flag(out[-1]):
            out.append(REDACTED)
        elif eq and is_secret_flag(flag):
            out.append(f"{flag}={REDACTED}")
        else:
            out.append(arg)
    return out


def secret_values(argv: Sequence[str], api_key: str | None = None, *more: str | None) -> tuple[str, ...]:
    """Every secret value a log or message could echo: the api key (and `more` keys, such as a remote server's
    admin key) and the values of secret flags in argv (longest first, so that a secret containing another is
    masked whole)."""
    values = [api_key or "", *(key or "" for key in more)]
    for previous, arg in itertools.pairwise(("", *argv)):
        flag, eq, value = arg.partition("=")
        if is_secret_flag(previous):
            values.append(arg)
        elif eq and is_secret_flag(flag):
            values.append(value)
    return tuple(sorted({value for value in values if value}, key=len, reverse=True))


def redact_text(text: str, secrets: Iterable[str]) -> str:
    """`text` with every (non-empty) secret replaced by '***'."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return text


def redact_file(path: Path, secrets: Iterable[str]) -> None:
    """Replace every secret in a file (a stopped server's log: SGLang prints its args, API key included) by '***'.

    The file is replaced atomically, and only when it holds a secret; a file that cannot be rewritten is left as
    it is (stopping a server never fails on its log)."""
    try:
        data = path.read_bytes()
    except OSError:
        return
    redacted = data
    for secret in secrets:
        if secret:
            redacted = redacted.replace(secret.encode(), REDACTED.encode())
    if redacted == data:
        return
    tmp = path.with_name(f".{path.name}.redacting")
    try:
        tmp.write_bytes(redacted)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
