"""`python -m pytest_sglang_perf.simulator.args.knob_check`: the `--sim-*` knobs of command lines, checked without
starting a server, for the plugin's pre-flight (the plugin runs the simulator as a process and never imports it).

stdin: a JSON list of command lines (each a list of strings). stdout: a JSON list, one object per command line:
`errors`, what `knobs.knob_errors` finds wrong with its knobs, and `sglang_args`, the command line without its
knobs and their values (what the simulator's SGLang parser gets). Exit 0; 2 on input that is not such a list.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

from pytest_sglang_perf.simulator.args.knobs import KNOB_PREFIX, knob_errors


def check_lines(lines: Sequence[Sequence[str]]) -> list[dict[str, list[str]]]:
    return [{"errors": knob_errors(line), "sglang_args": without_knobs(line)} for line in lines]


def without_knobs(args: Sequence[str]) -> list[str]:
    """`args` less every `--sim-*` flag (known or not) and its value: each knob takes one value, inline
    (`--sim-gpu=H200`) or next (a next argument that is an option, not a number, is not its value)."""
    rest: list[str] = []
    skip = False
    for i, arg in enumerate(args):
        if skip:
            skip = False
        elif arg.startswith(KNOB_PREFIX):
            skip = "=" not in arg and i + 1 < len(args) and _is_value(args[i + 1])
        else:
            rest.append(arg)
    return rest


def _is_value(arg: str) -> bool:
    if not arg.startswith("-"):
        return True
    try:
        float(arg)
    except ValueError:
        return False
    return True


def _read(text: str) -> list[list[str]]:
    data: Any = json.loads(text)
    if not isinstance(data, list) or not all(isinstance(line, list) and all(isinstance(a, str) for a in line)
                                             for line in data):
        raise ValueError("expected a JSON list of command lines (lists of strings)")
    return data


def main() -> int:
    try:
        lines = _read(sys.stdin.read())
    except ValueError as exc:
        print(f"knob_check: {exc}", file=sys.stderr)
        return 2
    json.dump(check_lines(lines), sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
