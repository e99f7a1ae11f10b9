"""pytest-xdist scheduling: every test of one variant goes to one worker, so each variant's server boots once.

Imported by plugin.py's `pytest_xdist_make_scheduler`, only under pytest-xdist (it imports xdist, not pytest).
The controller sees node ids only; a perf test's id ends with its variant's parameter (`test_x[tp2]`,
`test_x[512-tp2]`), which names its work unit. Every other test is a unit of its own, as under `--dist load`.

Why not xdist's own `--dist loadgroup` alone: it groups by an `@<group>` suffix that its workers append to node ids
from the `xdist_group` mark (plugin.py marks every variant's tests), and from pytest 9.2 on a node id can no longer
be rewritten that way (pytest-xdist 3.8 still tries), so the groups silently fall apart and every worker boots every
variant. Reading the variant from the id works with every pytest.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

DISTRIBUTIONS = ("load", "loadgroup")
"""The `--dist` modes this scheduler replaces (`-n N` alone means `load`); the others are left to xdist."""


def variant_scope(nodeid: str, variants: Sequence[str]) -> str | None:
    """The variant a perf test's node id belongs to (an xdist `@group` suffix ignored); None for any other test."""
    at, bracket = nodeid.rfind("@"), nodeid.rfind("]")
    plain = nodeid[:at] if at > bracket >= 0 else nodeid
    for name in variants:
        if plain.endswith((f"[{name}]", f"-{name}]")):
            return name
    return None


def variant_scheduler(config: Any, log: Any, variants: Sequence[str]) -> object:
    """xdist's scope scheduler with a variant as the scope of its tests."""
    from xdist.scheduler import LoadScopeScheduling

    class VariantScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            name = variant_scope(nodeid, variants)
            return nodeid if name is None else f"sglang-perf variant {name}"

    return VariantScheduling(config, log)
