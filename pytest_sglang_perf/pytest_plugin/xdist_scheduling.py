"""pytest-xdist scheduling: every test of one variant goes to one worker, so each variant's server boots once.

Imported by hooks.py's `pytest_xdist_make_scheduler`, only under pytest-xdist (it imports xdist, not pytest).
The controller sees node ids only; a perf test's id ends with its variant's parameter (`test_x[tp2]`,
`test_x[512-tp2]`), which names its work unit. Every other test keeps the unit its `--dist` mode gives it: its own
under `load` and `worksteal` (which become scope scheduling: a variant's tests cannot be stolen one by one), its
module or class under `loadscope`, its file under `loadfile`, its `xdist_group` under `loadgroup`. `--dist each`
runs every test on every worker, which measures every cell once per worker: pytest_plugin/hooks.py refuses it.

Why not xdist's own `--dist loadgroup` with an `xdist_group` mark per variant: it groups by an `@<group>` suffix
that its workers append to node ids, and from pytest 9.2 on a node id can no longer be rewritten that way
(pytest-xdist 3.8 still tries), so the groups silently fall apart and every worker boots every variant. Reading the
variant from the id works with every pytest (docs/scaling.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

_BASES = {"load": "LoadScopeScheduling", "worksteal": "LoadScopeScheduling", "loadscope": "LoadScopeScheduling",
          "loadfile": "LoadFileScheduling", "loadgroup": "LoadGroupScheduling"}
DISTRIBUTIONS = tuple(_BASES)
"""The `--dist` modes this scheduler replaces (`-n N` alone means `load`)."""
_OWN_SCOPES = ("loadscope", "loadfile", "loadgroup")
"""Modes whose scopes the other tests keep."""


def variant_scope(nodeid: str, variants: Sequence[str]) -> str | None:
    """The variant a perf test's node id belongs to (an xdist `@group` suffix ignored); None for any other test."""
    at, bracket = nodeid.rfind("@"), nodeid.rfind("]")
    plain = nodeid[:at] if at > bracket >= 0 else nodeid
    for name in sorted(variants, key=len, reverse=True):  # `b-a` before `a`: `test_x[b-a]` is b-a's
        if plain.endswith((f"[{name}]", f"-{name}]")):
            return name
    return None


def variant_scheduler(config: Any, log: Any, variants: Sequence[str], dist: str) -> object:
    """xdist's scope scheduler of `dist`'s kind, with a variant as the scope of its tests."""
    import xdist.scheduler

    base: Any = getattr(xdist.scheduler, _BASES[dist])
    own = dist in _OWN_SCOPES

    class VariantScheduling(base):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            name = variant_scope(nodeid, variants)
            if name is not None:
                return f"sglang-perf variant {name}"
            return str(super()._split_scope(nodeid)) if own else nodeid

    return VariantScheduling(config, log)
