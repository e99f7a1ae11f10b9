"""The simulator's `--sim-*` knobs of planned command lines, checked before any server starts.

The simulator owns its knobs (simulator/args/knobs.py: names, values, did-you-mean) and the plugin never imports
the simulator: it runs the simulator's checker as a process (`simulator/args/knob_check.py`), once for all the
command lines of a session, and only when one of them has a knob. Plain Python, no pytest.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pytest_sglang_perf.errors import SGLangPerfError
from pytest_sglang_perf.server.plan import ServerPlan

KNOB_PREFIX = "--sim-"
VERSION_KNOB = "--sim-sglang-version"
VERSION_VARIABLE = "SGLANG_SIM_SGLANG_VERSION"
"""The simulator's knob for the SGLang release it plays (simulator/args/knobs.py), and its variable."""
CHECKER = ("-m", "pytest_sglang_perf.simulator.args.knob_check")
SIMULATE_ARGS = "simulate.args"
"""The configuration key of the knobs every simulated variant gets."""
CHECK_TIMEOUT = 120.0
"""Seconds for the checker process (it starts in a fraction of a second; a loaded CI machine is slower)."""


def simulated_version(args: Sequence[str], environ: Mapping[str, str]) -> str | None:
    """The SGLang release `--sim-sglang-version` (or its variable) asks the simulator to play; None: its default."""
    for i, arg in enumerate(args):
        if arg == VERSION_KNOB and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(VERSION_KNOB + "="):
            return arg.split("=", 1)[1]
    return environ.get(VERSION_VARIABLE) or None


class KnobCheckFailed(SGLangPerfError):
    """The simulator's knob checker did not answer (a broken installation); the message has its output."""


@dataclass(frozen=True)
class KnobCheck:
    errors: tuple[str, ...]
    """What is wrong with the command line's knobs (unknown, with the closest name; missing or bad value)."""
    sglang_args: tuple[str, ...]
    """The command line without its knobs: what the simulator's SGLang parser gets."""


def check_knobs(lines: Sequence[Sequence[str]]) -> list[KnobCheck]:
    """One KnobCheck per command line, in order."""
    if not any(arg.startswith(KNOB_PREFIX) for line in lines for arg in line):
        return [KnobCheck((), tuple(line)) for line in lines]
    command = [sys.executable, *CHECKER]
    try:
        done = subprocess.run(command, input=json.dumps([list(line) for line in lines]), capture_output=True,
                              text=True, timeout=CHECK_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise KnobCheckFailed(f"checking the simulator's --sim-* knobs failed: {exc}") from None
    if done.returncode != 0:
        raise KnobCheckFailed(f"checking the simulator's --sim-* knobs failed (exit {done.returncode} "
                              f"of {' '.join(command)}): {done.stderr.strip()[-2000:]}")
    return [KnobCheck(tuple(item["errors"]), tuple(item["sglang_args"])) for item in json.loads(done.stdout)]


@dataclass(frozen=True)
class PlanKnobs:
    """A simulated variant's knobs, checked."""

    errors: tuple[str, ...]
    """Each problem, prefixed with the configuration key it is in: `args`, `variants.<name>` or `simulate.args`."""
    sglang_args: tuple[str, ...]
    """The variant's args (`args` + `variants.<name>`) without knobs: what the pre-flight parses as SGLang's."""


def plan_knobs(plans: Sequence[ServerPlan]) -> dict[str, PlanKnobs]:
    """Every simulated plan's knobs by variant name (a plan for real SGLang has none: SGLang rejects `--sim-*`)."""
    parts = {plan.variant.name: _parts(plan) for plan in plans if plan.simulated}
    lines = list(dict.fromkeys(args for found in parts.values() for args in found.values()))
    checked = dict(zip(lines, check_knobs(lines), strict=True))
    return {name: PlanKnobs(
        tuple(f"{where}: {error}" for where, args in found.items() for error in checked[args].errors),
        tuple(arg for where, args in found.items() if where != SIMULATE_ARGS for arg in checked[args].sglang_args),
    ) for name, found in parts.items()}



def _parts(plan: ServerPlan) -> dict[str, tuple[str, ...]]:
    """Where each part of a simulated command line comes from: `plan_server` builds it as the program,
    `--model-path X`, `args` + `variants.<name>` (plan.args), then `simulate.args`."""
    variant = plan.variant.args
    base = plan.args[:len(plan.args) - len(variant)]
    extras = plan.command[plan.command.index("--model-path") + 2 + len(plan.args):]
    return {"args": base, f"variants.{plan.variant.name}": variant, SIMULATE_ARGS: extras}
