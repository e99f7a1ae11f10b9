"""The report's last section: the environment the cells were measured in (model, versions, GPUs) and the machine
and commit the session ran on, with the machine's label (in a simulated run, the host's facts did not produce the
numbers). Older results files have no machine section; the report says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_sglang_perf.outputs.markdown_text import bullets, code, text

_VERSIONS = (("pytest_sglang_perf", "pytest-sglang-perf"), ("sglang", "SGLang"), ("torch", "torch"),
             ("python", "Python"))
_SHOWN = {"model", "simulated", "gpus", "driver", "platform", *(key for key, _ in _VERSIONS)}
_MACHINE_SHOWN = {"label", "host", "cpu", "cpu_count", "gpus", "driver", "commit", "dirty", "python", "platform"}


def environment_section(doc: Mapping[str, Any]) -> list[str]:
    """`## Environment`: model, versions, GPUs, platform, when generated; then `### Machine` with its label."""
    env: Mapping[str, Any] = doc.get("environment") or {}
    simulated = bool(doc.get("simulated") or env.get("simulated"))
    items = [f"**Model**: {code(env['model'])}" if env.get("model") else "**Model**: -",
             f"**Versions**: {_versions(env)}",
             f"**GPUs**: {_gpus(env.get('gpus'), env.get('driver'), simulated=simulated)}",
             f"**Platform**: {text(env.get('platform') or '-')}"]
    items.extend(f"**{text(key)}**: {text(value)}" for key, value in env.items() if key not in _SHOWN)
    if doc.get("generated_at"):
        items.append(f"**Generated at**: {text(doc['generated_at'])}")
    return ["## Environment", "", *bullets(items), "", *_machine(doc.get("machine"))]


def _versions(env: Mapping[str, Any]) -> str:
    """`pytest-sglang-perf 0.1.0 · SGLang 0.5.23 · torch not installed · Python 3.11.9` (the environment records no
    version for a package that is not installed)."""
    missing = {"sglang": "not installed", "torch": "not installed"}
    return " · ".join(f"{name} {text(env.get(key) or missing.get(key, 'unknown'))}" for key, name in _VERSIONS)


def _gpus(names: Any, driver: Any, *, simulated: bool) -> str:
    """`2 x NVIDIA H200 (driver 550.54)`, `none (simulated)`, `none found`."""
    listed = [str(n) for n in names] if isinstance(names, list) else []
    if not listed:
        return "none (simulated)" if simulated else "none found"
    counts = ", ".join(f"{listed.count(n)} x {text(n)}" for n in dict.fromkeys(listed))
    return counts + (f" (driver {text(driver)})" if driver else "")


def _machine(machine: Any) -> list[str]:
    if not isinstance(machine, Mapping):
        return ["### Machine", "", "Not recorded (a results file written before pytest-sglang-perf recorded it)."]
    label = machine.get("label")
    items = [f"**Host**: {text(machine.get('host') or '-')}",
             f"**CPU**: {_cpu(machine.get('cpu'), machine.get('cpu_count'))}",
             f"**GPUs**: {_gpus(machine.get('gpus'), machine.get('driver'), simulated=False)}",
             f"**Commit**: {_commit(machine.get('commit'), machine.get('dirty'))}",
             f"**Python**: {text(machine.get('python') or '-')}",
             f"**Platform**: {text(machine.get('platform') or '-')}"]
    items.extend(f"**{text(key)}**: {text(value)}" for key, value in machine.items() if key not in _MACHINE_SHOWN)
    head = ["### Machine", ""] + ([f"*{text(label)}*", ""] if label else [])
    return [*head, *bullets(items)]


def _cpu(model: Any, count: Any) -> str:
    shown = text(model) if model else "unknown"
    return f"{shown} ({count} logical CPUs)" if isinstance(count, int) else shown


def _commit(commit: Any, dirty: Any) -> str:
    """`abc123def456`, with `(dirty: ...)` when tracked files had changes; `not a git checkout` without one."""
    if not commit:
        return "not a git checkout"
    state = {True: " (dirty: tracked files had uncommitted changes)", False: " (clean)"}.get(dirty, "")
    return f"{code(commit)}{state}"

