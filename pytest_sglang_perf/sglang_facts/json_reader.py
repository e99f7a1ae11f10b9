"""Reading a JSON data file into typed values, strictly: every key is checked, and none is silently ignored.

A `JsonObject` hands out its keys one typed value at a time; a key that is missing, of the wrong type, or never
read (a typo, or a fact the reading code would skip) is a `JsonValueError` whose message names the key by its
path (`effective_fields.cuda_graph_config.paths`). `_comment` keys are documentation: always skipped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from types import MappingProxyType, TracebackType
from typing import Any

JsonScalar = str | int | float | bool | None
COMMENT = "_comment"
_REQUIRED: Any = object()


class JsonValueError(ValueError):
    """A key is missing, unknown, or of the wrong type; the message names the key."""


def _is_text(value: object) -> bool:
    return isinstance(value, str)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_scalar(value: object) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _is_step(value: object) -> bool:
    return _is_text(value) or _is_int(value)


def _list_of(valid: Callable[[object], bool], *, non_empty: bool = False) -> Callable[[object], bool]:
    def check(value: object) -> bool:
        return isinstance(value, list) and (bool(value) or not non_empty) and all(valid(v) for v in value)

    return check


def _map_of(valid: Callable[[object], bool]) -> Callable[[object], bool]:
    def check(value: object) -> bool:
        return isinstance(value, dict) and all(valid(v) for k, v in value.items() if k != COMMENT)

    return check


_is_path = _list_of(_is_step, non_empty=True)


def _shown(value: object) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


class JsonObject:
    """One JSON object, read key by key. Use it as a context manager: leaving the block without an error checks
    that every key was read."""

    def __init__(self, data: object, where: str) -> None:
        if not isinstance(data, dict):
            raise JsonValueError(f"{where or 'the document'}: must be a JSON object, not {_shown(data)}")
        self._data: dict[str, object] = data
        self._where = where
        self._read = {COMMENT}

    def __enter__(self) -> JsonObject:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if kind is None:
            self.finish()

    def finish(self) -> None:
        """Raise for the first key nothing read."""
        unknown = [key for key in self._data if key not in self._read]
        if unknown:
            raise JsonValueError(f"{self._name(unknown[0])}: unknown key (a typo, or a fact nothing reads)")

    def key_names(self) -> list[str]:
        """Every key but `_comment`, in order (for an object whose keys are names, e.g. dests)."""
        return [key for key in self._data if key != COMMENT]

    def text(self, key: str) -> str:
        value: str = self._take(key, _is_text, "a string")
        return value

    def optional_text(self, key: str) -> str | None:
        value: str | None = self._take(key, _is_text, "a string", None)
        return value

    def flag(self, key: str) -> bool:
        value: bool = self._take(key, lambda v: isinstance(v, bool), "true or false", False)
        return value

    def texts(self, key: str, *, default: tuple[str, ...] = _REQUIRED) -> tuple[str, ...]:
        return tuple(self._take(key, _list_of(_is_text), "a list of strings", default))

    def ints(self, key: str) -> tuple[int, ...]:
        return tuple(self._take(key, _list_of(_is_int), "a list of integers"))

    def optional_scalar(self, key: str) -> JsonScalar:
        """A string, number or boolean; None when the key is absent (null is refused: it would read as absent)."""
        value: JsonScalar = self._take(key, lambda v: v is not None and _is_scalar(v), "a string, number or boolean",
                                       None)
        return value

    def scalars(self, key: str) -> tuple[JsonScalar, ...]:
        return tuple(self._take(key, _list_of(_is_scalar, non_empty=True), "a non-empty list of plain values"))

    def paths(self, key: str) -> tuple[tuple[str | int, ...], ...]:
        paths = self._take(key, _list_of(_is_path, non_empty=True),
                           "a non-empty list of paths (non-empty lists of keys and list indexes)")
        return tuple(tuple(path) for path in paths)

    def pattern(self, key: str) -> re.Pattern[str]:
        text = self.text(key)
        try:
            return re.compile(text)
        except re.error as exc:
            raise JsonValueError(f"{self._name(key)}: not a regular expression ({exc})") from None

    def text_map(self, key: str) -> Mapping[str, str]:
        return self._map(key, _is_text, "an object of strings")

    def int_map(self, key: str) -> Mapping[str, int]:
        return self._map(key, _is_int, "an object of integers")

    def child(self, key: str) -> JsonObject:
        """The object under `key` (an empty one when the key is absent)."""
        return JsonObject(self._take(key, lambda v: isinstance(v, dict), "a JSON object", {}), self._name(key))

    def children(self, key: str) -> tuple[JsonObject, ...]:
        """The objects of the list under `key` (none when the key is absent)."""
        items = self._take(key, lambda v: isinstance(v, list), "a list of JSON objects", [])
        return tuple(JsonObject(item, f"{self._name(key)}[{i}]") for i, item in enumerate(items))

    def _map(self, key: str, valid: Callable[[object], bool], expected: str) -> Mapping[str, Any]:
        value = self._take(key, _map_of(valid), expected, {})
        return MappingProxyType({k: v for k, v in value.items() if k != COMMENT})

    def _take(self, key: str, valid: Callable[[object], bool], expected: str, default: Any = _REQUIRED) -> Any:
        self._read.add(key)
        if key not in self._data:
            if default is _REQUIRED:
                raise JsonValueError(f"{self._name(key)}: missing")
            return default
        value = self._data[key]
        if not valid(value):
            raise JsonValueError(f"{self._name(key)}: must be {expected}, not {_shown(value)}")
        return value

    def _name(self, key: str) -> str:
        return f"{self._where}.{key}" if self._where else key
