"""Reading typed values from a TOML table: every failure is a ConfigError naming the file, the key and the fix."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pytest_sglang_perf.errors import SGLangPerfError

T = TypeVar("T")


class ConfigError(SGLangPerfError):
    """A configuration problem, with where it is and how to fix it."""


def expect_table(value: object, source: str, key: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: {key} must be a table, got {type(value).__name__}")
    return value


class Reader:
    """Reads typed values from a TOML table, turning every failure into a ConfigError with its location."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, key: str, problem: str) -> ConfigError:
        return ConfigError(f"{self.source}: {key}: {problem}")

    def check_keys(self, table: Mapping[str, Any], known: set[str], prefix: str) -> None:
        for key in table:
            if key not in known:
                names = ", ".join(sorted(known))
                raise self.fail(prefix + key, f"unknown key; known keys here: {names}")

    def get(self, table: Mapping[str, Any], key: str, parse: Callable[[Any], T], *,
            default: T | None = None, required: bool = False, prefix: str = "") -> T:
        if key not in table:
            if required:
                raise self.fail(prefix + key, "missing; it is required (e.g. model = \"Qwen/Qwen3.6-27B\")")
            return default  # type: ignore[return-value]
        try:
            return parse(table[key])
        except (ValueError, TypeError) as exc:
            raise self.fail(prefix + key, str(exc)) from None


def string(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected a non-empty string, got {value!r}")
    return value


def positive_int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"expected a whole number >= 1, got {value!r}")
    return value


def non_negative_int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"expected a whole number >= 0, got {value!r}")
    return value


def temperature(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 2:
        raise ValueError(f"expected a number from 0 to 2, got {value!r}")
    return float(value)


def whole_number(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected a whole number, got {value!r}")
    return value
