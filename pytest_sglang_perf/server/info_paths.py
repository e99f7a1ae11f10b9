"""Reading a `/server_info` document by JSON path (plain data, no I/O)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

MISSING = object()
"""What lookup() answers for a path the document does not have (None is a value /server_info may hold)."""


def lookup(info: Mapping[str, Any], path: Sequence[str | int]) -> Any:
    """The value at a JSON path (an int indexes a list), or MISSING."""
    node: Any = info
    for step in path:
        in_list = isinstance(step, int) and isinstance(node, list) and -len(node) <= step < len(node)
        in_map = isinstance(step, str) and isinstance(node, Mapping) and step in node
        if not (in_list or in_map):
            return MISSING
        node = node[step]
    return node
