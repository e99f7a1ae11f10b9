"""The package's map, as a newcomer and a reviewer read it: its modules by wing, who imports whom, and cycles.

    python tools/import_map.py tree      the modules by wing, with their line counts
    python tools/import_map.py wings     each wing and the wings it imports (every import: lazy, TYPE_CHECKING too)
    python tools/import_map.py cycles    the import cycles between wings and between modules (none is the goal)

It reads the source (no import of the package), as tests/unit/test_layout.py does.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = "pytest_sglang_perf"
PACKAGE = Path(__file__).resolve().parents[1] / ROOT


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _is_module(name: str, known: dict[str, Path]) -> bool:
    return name in known


def imports(path: Path, module: str, known: dict[str, Path]) -> set[str]:
    """The package's modules that `path` imports, wherever the import stands."""
    found: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                kept = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*kept, base]).strip(".")
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names if _is_module(f"{base}.{a.name}", known))
    return {name for name in found if name in known and name != module}


def wing(module: str) -> str:
    """The top-level part a module belongs to: its subpackage, or the top-level module itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "(root)"


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(path, name, known) for name, path in known.items()}


def wing_graph(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    table: dict[str, set[str]] = defaultdict(set)
    for module, targets in edges.items():
        table[wing(module)].update(wing(t) for t in targets if wing(t) not in (wing(module), "(root)"))
        table.setdefault(wing(module), set())
    return dict(table)


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start not in index:
            _strongconnect(start, edges, index, low, stack, on_stack, found)
    return [sorted(c) for c in found if len(c) > 1]


def _strongconnect(start: str, edges: dict[str, set[str]], index: dict[str, int], low: dict[str, int],
                   stack: list[str], on_stack: set[str], found: list[list[str]]) -> None:
    work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(edges.get(start, ()))))]
    index[start] = low[start] = len(index)
    stack.append(start)
    on_stack.add(start)
    while work:
        node, children = work[-1]
        child = next(children, None)
        if child is None:
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                found.append(component)
        elif child not in index:
            index[child] = low[child] = len(index)
            stack.append(child)
            on_stack.add(child)
            work.append((child, iter(sorted(edges.get(child, ())))))
        elif child in on_stack:
            low[node] = min(low[node], index[child])


def _short(name: str) -> str:
    return name.removeprefix(ROOT + ".")


def tree_lines() -> Iterable[str]:
    by_wing: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for name, path in modules().items():
        by_wing[wing(name)].append((_short(name), len(path.read_text(encoding="utf-8").splitlines())))
    for part in sorted(by_wing):
        members = by_wing[part]
        yield f"{part}/  {len(members)} modules, {sum(n for _, n in members)} lines"
        for name, count in sorted(members):
            yield f"    {name}  {count}"


def main(argv: list[str]) -> int:
    what = argv[0] if argv else "wings"
    edges = graph()
    if what == "tree":
        print("\n".join(tree_lines()))
    elif what == "wings":
        for part, targets in sorted(wing_graph(edges).items()):
            print(f"{part:14} -> {', '.join(sorted(targets)) or '(nothing)'}")
    elif what == "cycles":
        wing_cycles = cycles(wing_graph(edges))
        module_cycles = cycles({_short(k): {_short(t) for t in v} for k, v in edges.items()})
        print(f"wing cycles: {len(wing_cycles)}")
        for c in wing_cycles:
            print("  " + " <-> ".join(c))
        print(f"module cycles: {len(module_cycles)}")
        for c in module_cycles:
            print("  " + " <-> ".join(c))
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
