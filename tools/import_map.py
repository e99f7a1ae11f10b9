"""The package's map, as a newcomer and a reviewer read it: its modules by part, who imports whom, and cycles.

    python tools/import_map.py tree      the modules by part (wing), with their line counts
    python tools/import_map.py wings     each part and the parts it imports (every import: lazy, TYPE_CHECKING too)
    python tools/import_map.py cycles    the import cycles between parts and between modules (none is the goal)

It reads the source (no import of the package) through tests/unit/test_layout.py, where the layers are declared and
enforced; this only prints what that test checks.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit"))
import test_layout  # the layers and the import reader are declared once, there

ROOT = test_layout.ROOT


def _short(name: str) -> str:
    return name.removeprefix(ROOT + ".")


def part_graph() -> dict[str, set[str]]:
    table: dict[str, set[str]] = defaultdict(set)
    for module, imported in test_layout.EDGES.items():
        part = test_layout._part(module)
        table[part].update(other for other in map(test_layout._part, imported) if other != part)
    return dict(table)


def tree_lines() -> Iterable[str]:
    by_part: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for name, path in test_layout.MODULES.items():
        by_part[test_layout._part(name)].append((_short(name), len(path.read_text(encoding="utf-8").splitlines())))
    for part in sorted(by_part):
        members = by_part[part]
        yield f"{part}/  {len(members)} modules, {sum(n for _, n in members)} lines"
        yield from (f"    {name}  {count}" for name, count in sorted(members))


def main(argv: list[str]) -> int:
    what = argv[0] if argv else "wings"
    if what == "tree":
        print("\n".join(tree_lines()))
    elif what == "wings":
        for part, imported in sorted(part_graph().items()):
            print(f"{part:14} -> {', '.join(sorted(imported)) or '(nothing)'}")
    elif what == "cycles":
        for label, graph in (("part", part_graph()),
                             ("module", {_short(k): {_short(t) for t in v} for k, v in test_layout.EDGES.items()})):
            found = test_layout._cycles(graph)
            print(f"{label} cycles: {len(found)}")
            print("".join(f"  {' <-> '.join(cycle)}\n" for cycle in found), end="")
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
