"""The house rules of the package layout (docs/architecture.md): the layers, declared once here, and module size.

A part (a top-level subpackage, or a top-level module) may import its own modules and the parts of the layers
below its own, nothing else: not a part of its own layer, not one above. Every import counts, also one inside a
function or under TYPE_CHECKING: a lazy import is still a dependency. docs/architecture.md's layer table is this
list, rendered (`python tests/unit/test_layout.py` prints it).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "pytest_sglang_perf"
ROOT = "pytest_sglang_perf"
PUBLIC = "__init__"
"""The package itself (its __init__: the version and the warnings users filter) counts as a part of its own."""

LAYERS: tuple[tuple[str, ...], ...] = (
    (PUBLIC, "errors", "wrapping", "prompts"),
    ("sglang_facts", "hardware"),
    ("roofline",),
    ("measurement",),
    ("config",),
    ("gate", "server"),
    ("plots",),
    ("outputs",),
    ("session",),
    ("report",),
    ("pytest_plugin", "cli"),
    ("plugin",),
)
"""Bottom first. The leaves; SGLang's facts as data and the GPU probe (a process of its own); the physics; the
client and its records; the user's configuration; baselines and verdicts beside the server's lifecycle; plots,
then the files a run writes; the session, which sequences; the report, fed by its records; the two faces; the
pytest11 entry point."""
BESIDE = {"simulator": ("simulator", "sglang_facts", "roofline", "errors")}
"""Parts outside the layers, with all they may import. The plugin never imports the simulator: it starts it as a
process (`python -m pytest_sglang_perf.simulator`)."""
PYTEST_FACING = ("pytest_plugin", "plugin")
"""The parts that adapt pytest; everything else is plain Python that can run without it."""
MAX_TOP_LEVEL = 8
MAX_LINES = 400


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        yield name, path


def _imports(path: Path, module: str) -> set[str]:
    """Every module `path` imports: `from a import b` counts as `a.b` when `a.b` is a module, else as `a`."""
    found: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package.split(".")[: len(package.split(".")) - node.level + 1], base]).strip(".")
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names if _is_module(f"{base}.{alias.name}"))
    return found


def _is_module(name: str) -> bool:
    relative = Path(*name.split(".")[1:])
    return name.startswith(ROOT + ".") and ((PACKAGE / relative).with_suffix(".py").is_file()
                                            or (PACKAGE / relative / "__init__.py").is_file())


def _own(imports: set[str]) -> set[str]:
    return {name for name in imports if name == ROOT or name.startswith(ROOT + ".")}


def _part(module: str) -> str:
    """The part a module belongs to: its top-level subpackage or module; the package itself is PUBLIC."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else PUBLIC


MODULES = dict(_modules())
LAYER_OF = {part: number for number, layer in enumerate(LAYERS) for part in layer}
EDGES = {module: _own(_imports(path, module)) - {module} for module, path in MODULES.items()}


def _allowed(importer: str, imported: str) -> bool:
    if importer == imported:
        return True
    if importer in BESIDE:
        return imported in BESIDE[importer]
    if imported not in LAYER_OF:
        return False
    return LAYER_OF[imported] < LAYER_OF[importer]


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm, recursive: the graph is small)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for child in sorted(edges.get(node, ())):
            if child not in index:
                visit(child)
                low[node] = min(low[node], low[child])
            elif child in stack:
                low[node] = min(low[node], index[child])
        if low[node] == index[node]:
            component = stack[stack.index(node):]
            del stack[stack.index(node):]
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def layer_table() -> str:
    """docs/architecture.md's layer table, from LAYERS (top first, as a reader meets them)."""
    rows = ["| layer | parts (each may import its own modules and the parts of the layers below) |", "|---|---|"]
    for number in range(len(LAYERS) - 1, -1, -1):
        names = ", ".join(f"`{part}`" if part != PUBLIC else "`pytest_sglang_perf` (its `__init__`)"
                          for part in LAYERS[number])
        rows.append(f"| {number} | {names} |")
    for part, allowed in BESIDE.items():
        rows.append(f"| beside | `{part}`: only {', '.join(f'`{name}`' for name in allowed if name != part)} |")
    return "\n".join(rows) + "\n"


def test_the_layout_is_found() -> None:
    assert f"{ROOT}.plugin" in MODULES and f"{ROOT}.simulator.process.cli" in MODULES
    assert any(_part(name) == "sglang_facts" for name in MODULES)


def test_every_part_has_a_place() -> None:
    parts = {_part(module) for module in MODULES}
    assert sorted(parts - set(LAYER_OF) - set(BESIDE)) == []
    assert sorted((set(LAYER_OF) | set(BESIDE)) - parts) == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_follow_the_layers(module: str) -> None:
    importer = _part(module)
    wrong = sorted(name for name in EDGES[module] if not _allowed(importer, _part(name)))
    assert wrong == [], (f"{module} (part {importer!r}) imports {wrong}: a part imports only its own modules and the "
                         "parts of lower layers (LAYERS in tests/unit/test_layout.py)")


def test_no_import_cycle_between_modules() -> None:
    assert _cycles(EDGES) == []


def test_no_import_cycle_between_parts() -> None:
    parts: dict[str, set[str]] = {}
    for module, imported in EDGES.items():
        parts.setdefault(_part(module), set()).update(_part(name) for name in imported if _part(name) != _part(module))
    assert _cycles(parts) == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_only_the_pytest_facing_parts_import_pytest(module: str) -> None:
    uses_pytest = {name for name in _imports(MODULES[module], module)
                   if name.partition(".")[0] in ("pytest", "_pytest")}
    if _part(module) in PYTEST_FACING:
        return
    assert uses_pytest == set(), f"{module} imports {uses_pytest}: move that code to the pytest face (pytest_plugin/)"


def test_the_top_level_keeps_only_the_public_surface_and_leaves() -> None:
    top = sorted(path.stem for path in PACKAGE.glob("*.py") if path.stem != "__init__")
    assert len(top) <= MAX_TOP_LEVEL, f"{len(top)} top-level modules ({top}): give a new one a wing"


def test_the_architecture_page_shows_these_layers() -> None:
    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert layer_table() in page, "docs/architecture.md's layer table differs: paste `python tests/unit/test_layout.py`"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_is_over_400_lines(module: str) -> None:
    lines = len(MODULES[module].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{module} has {lines} lines: split it by concern"


def test_the_rules_catch_a_violation(tmp_path: Path) -> None:
    """The checker itself: a lazy import inside a function is found, `from a import module` resolves, and an import
    of a higher layer, of a sibling in the same layer and of the simulator are each refused."""
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from pytest_sglang_perf.simulator import process\n    import pytest\n")
    found = _imports(source, f"{ROOT}.gate.m")
    assert f"{ROOT}.simulator.process" in found and "pytest" in found
    assert not _allowed("gate", "simulator")
    assert not _allowed("gate", "server") and not _allowed("measurement", "config")
    assert _allowed("config", "measurement") and _allowed("simulator", "roofline")


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


if __name__ == "__main__":
    sys.stdout.write(layer_table())
