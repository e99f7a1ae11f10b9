"""The house rules of the package layout (docs/architecture.md): who may import whom, and module size.

Every import counts, also one inside a function or under TYPE_CHECKING: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_sglang_perf"
ROOT = "pytest_sglang_perf"
PYTEST_FACING = {"plugin", "options", "handle", "cli", "benchmark_bridge"}
"""The modules that adapt pytest; everything else is plain Python that can run without it."""
SHARED_LEAVES = {f"{ROOT}.errors"}
"""Leaf modules every part may import (they import nothing of the package)."""
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


def _within(name: str, *prefixes: str) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


MODULES = dict(_modules())


def test_the_layout_is_found() -> None:
    assert f"{ROOT}.plugin" in MODULES and f"{ROOT}.simulator.process.cli" in MODULES
    assert any(_within(name, f"{ROOT}.sglang_facts") for name in MODULES)


@pytest.mark.parametrize("module", [m for m in MODULES if not _within(m, f"{ROOT}.simulator")])
def test_the_plugin_never_imports_the_simulator(module: str) -> None:
    """It starts the simulator as a process (`python -m pytest_sglang_perf.simulator`), nothing more."""
    imported = _own(_imports(MODULES[module], module))
    assert not [name for name in imported if _within(name, f"{ROOT}.simulator")]


@pytest.mark.parametrize("module", [m for m in MODULES if _within(m, f"{ROOT}.simulator")])
def test_the_simulator_imports_only_itself_the_sglang_facts_and_the_roofline(module: str) -> None:
    imported = _own(_imports(MODULES[module], module)) - {ROOT}
    allowed = (f"{ROOT}.simulator", f"{ROOT}.sglang_facts", f"{ROOT}.roofline", *SHARED_LEAVES)
    assert [name for name in imported if not _within(name, *allowed)] == []


@pytest.mark.parametrize("module", [m for m in MODULES if _within(m, f"{ROOT}.sglang_facts")])
def test_the_sglang_facts_import_nothing_else_of_the_package(module: str) -> None:
    imported = _own(_imports(MODULES[module], module)) - {ROOT}
    assert [name for name in imported if not _within(name, f"{ROOT}.sglang_facts", *SHARED_LEAVES)] == []


@pytest.mark.parametrize("module", [m for m in MODULES if _within(m, f"{ROOT}.roofline")])
def test_the_roofline_imports_only_itself_and_the_sglang_facts(module: str) -> None:
    """The physics both sides share: the plugin's ceilings and the simulator's timing read the same bytes."""
    imported = _own(_imports(MODULES[module], module)) - {ROOT}
    allowed = (f"{ROOT}.roofline", f"{ROOT}.sglang_facts", *SHARED_LEAVES)
    assert [name for name in imported if not _within(name, *allowed)] == []


@pytest.mark.parametrize("module", [m for m in MODULES if _within(m, f"{ROOT}.hardware")])
def test_the_hardware_probe_imports_only_itself(module: str) -> None:
    """It runs as a process of its own (`python -m pytest_sglang_perf.hardware`): nothing of the plugin comes along."""
    imported = _own(_imports(MODULES[module], module)) - {ROOT}
    assert [name for name in imported if not _within(name, f"{ROOT}.hardware", *SHARED_LEAVES)] == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_only_the_pytest_facing_modules_import_pytest(module: str) -> None:
    uses_pytest = {name for name in _imports(MODULES[module], module) if _within(name, "pytest", "_pytest")}
    if module.removeprefix(ROOT + ".") in PYTEST_FACING:
        return
    assert uses_pytest == set(), f"{module} imports {uses_pytest}: move that code to a pytest-facing module"


@pytest.mark.parametrize("leaf", sorted(SHARED_LEAVES))
def test_shared_leaves_import_nothing_of_the_package(leaf: str) -> None:
    assert _own(_imports(MODULES[leaf], leaf)) == set()


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_is_over_400_lines(module: str) -> None:
    lines = len(MODULES[module].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{module} has {lines} lines: split it by concern"


def test_the_rules_catch_a_violation(tmp_path: Path) -> None:
    """The checker itself: a lazy import inside a function is found, `from a import module` resolves."""
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from pytest_sglang_perf.simulator import process\n    import pytest\n")
    found = _imports(source, f"{ROOT}.gate.m")
    assert f"{ROOT}.simulator.process" in found and "pytest" in found
