"""Every flag of a corpus through SGLang's own parser and resolution, and through the plugin's effective-configuration
comparison, as JSON (run as a script where `sglang` imports; this folder is sys.path[0]).

stdin `{"head": [arg, ...], "batches": [[{"flag": "--x", "args": [arg, ...], "key": optional}, ...], ...]}`: each
batch is one command line setting all its flags. stdout `{"results": {key (default: the flag): Result}}`, a result
being `{"exit": 0 | 1 | 2, "error": SGLang's last traceback line | null, "dest", "requested", "after", "status",
"effective", "because", "logged"}`:

- SGLang: `prepare_server_args(head + args)` (its parser; `requested` is the record's field for the flag's dest as
  parsed), then `resolve_once()`; `after` is the same field in `resolved_dict()`, which `/server_info` serves.
- The plugin: `requested_flags(args)` with the installed SGLang's parser, then `effective.evaluate()` against
  `resolved_dict()` (plus `version`) and the messages SGLang logged while resolving; `status` / `effective` /
  `because` are the flag's outcome (`secret`: a flag the report never shows); `logged`: SGLang's messages that name
  the flag or its dest.

A batch that SGLang refuses is split in halves until the flag it refuses stands alone. Each resolution runs in a child
forked after SGLang is imported (resolution cannot be retried and reconfigures logging), as many at once as there
are cores.
"""

from __future__ import annotations

import json
import logging
import os
import select
import sys
from collections.abc import Callable
from functools import partial
from typing import Any

from parse_both import jsonable
from resolve_both import ended, fork, last_line

Result = dict[str, Any]


class _Messages(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def resolve_batch(head: list[str], cases: list[dict[str, Any]]) -> Result:
    """One command line setting every case's flag: SGLang's resolution, then the plugin's verdict on each flag."""
    from sglang.srt.server_args import prepare_server_args

    from pytest_sglang_perf.server.effective import evaluate
    from pytest_sglang_perf.server.startup import startup_facts
    from pytest_sglang_perf.sglang_facts.parsers import installed_sglang_parser
    from pytest_sglang_perf.sglang_facts.requested import requested_flags
    from pytest_sglang_perf.sglang_facts.rules import load_rules

    parser = installed_sglang_parser()
    assert parser is not None, "SGLang does not import here"
    rules = load_rules("0.5.23")
    args = [arg for case in cases for arg in case["args"]]
    messages = _Messages()
    logging.getLogger().addHandler(messages)
    try:
        record = prepare_server_args([*head, *args])
        requested = requested_flags(args, parser)
        dests = {r.flag: r.dest for r in requested}
        before = {dest: jsonable(getattr(record, dest)) for dest in dests.values()}
        record.resolve_once()
    except SystemExit as exc:
        return {"exit": exc.code, "error": None}
    except Exception as exc:
        return {"exit": 1, "error": last_line(exc)}
    info = jsonable(dict(record.resolved_dict()))
    info["version"] = rules.sglang_version
    config = evaluate("corpus", requested, info, startup_facts(""), messages.lines, rules)
    outcomes = {o.dest: o for o in config.flags}
    flags = {}
    for case in cases:
        dest = dests[case["flag"]]
        outcome = outcomes.get(dest)
        flags[case.get("key", case["flag"])] = {
            "dest": dest, "requested": before[dest], "after": info.get(dest),
            "status": "secret" if outcome is None else outcome.status.value,
            "effective": None if outcome is None else jsonable(outcome.effective),
            "because": None if outcome is None else outcome.because,
            "logged": [line for line in messages.lines if case["flag"] in line or dest in line]}
    return {"exit": 0, "error": None, "flags": flags}


def resolve_all(head: list[str], batches: list[list[dict[str, Any]]]) -> dict[str, Result]:
    """Each case's result: its batch's, or (when SGLang refuses the batch) each half's, down to single flags."""
    results: dict[str, Result] = {}
    queue = batches
    while queue:
        outcomes = run_forked([partial(resolve_batch, head, batch) for batch in queue])
        halves = []
        for batch, outcome in zip(queue, outcomes, strict=True):
            if outcome["exit"] == 0:
                results.update({flag: {"exit": 0, "error": None, **found} for flag, found in outcome["flags"].items()})
            elif len(batch) == 1:
                results[batch[0].get("key", batch[0]["flag"])] = {"exit": outcome["exit"], "error": outcome["error"]}
            else:
                halves += [batch[:len(batch) // 2], batch[len(batch) // 2:]]
        queue = halves
    return results


def run_forked(jobs: list[Callable[[], Result]]) -> list[Result]:
    """Each job in a child forked from this process, as many at once as there are cores; their results in order."""
    results: list[Result | None] = [None] * len(jobs)
    running: dict[int, tuple[int, int, bytearray]] = {}  # read end -> (job index, pid, bytes so far)
    waiting = list(enumerate(jobs))
    while waiting or running:
        while waiting and len(running) < (os.cpu_count() or 1):
            index, job = waiting.pop(0)
            read_end, pid = fork(job)
            running[read_end] = (index, pid, bytearray())
        ready, _, _ = select.select(list(running), [], [])
        for read_end in ready:
            chunk = os.read(read_end, 1 << 16)
            if chunk:
                running[read_end][2].extend(chunk)
                continue
            index, pid, data = running.pop(read_end)
            os.close(read_end)
            result = results[index] = ended(bytes(data), pid)
            result.pop("stderr", None)  # resolution's own warnings: not what is compared
    return [result for result in results if result is not None]


def main() -> int:
    for name in [key for key in os.environ if key.startswith("SGLANG_SIM_")]:
        del os.environ[name]
    payload = json.load(sys.stdin)
    import sglang.srt.arg_groups.pipeline
    import sglang.srt.server_args

    del sglang  # imported once here, before forking
    json.dump({"results": resolve_all(payload["head"], payload["batches"])}, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
