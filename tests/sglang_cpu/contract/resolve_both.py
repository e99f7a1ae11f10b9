"""SGLang's own argument resolution next to the simulator's, as JSON (run as a script where `sglang` imports).

stdin `{"cases": [[arg, ...], ...]}`, stdout `{"results": [{"sglang": Outcome, "simulator": Outcome}, ...]}`. An
outcome is `{"exit": 0 | 1 | 2, "error": last traceback line | null, "stderr": str, "resolved": {field: value}}`.

SGLang side: `prepare_server_args(argv)` then `ServerArgs.resolve_once()` (which ends with `check_server_args()`),
exactly what `python -m sglang.launch_server` runs before it starts anything. A failed resolution cannot be retried
and resolution reconfigures logging, so every case runs in its own process: forked from this one once SGLang is
imported (importing takes seconds, a forked case a fraction of one). Simulator side: `simulator.cli.prepare(argv)`,
what `python -m pytest_sglang_perf.simulator` runs before it boots, also forked. Needs a local model folder in the
argv, `--device cpu` and HF_HUB_OFFLINE=1.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

from parse_both import jsonable  # this folder is sys.path[0]: the scripts run as `python <folder>/<script>`

Outcome = dict[str, Any]


def last_line(exc: BaseException) -> str:
    return traceback.format_exception_only(exc)[-1].strip()


def sglang_resolve(argv: list[str]) -> Outcome:
    from sglang.srt.server_args import prepare_server_args

    try:
        server_args = prepare_server_args(argv)
        server_args.resolve_once()
    except SystemExit as exc:
        return {"exit": exc.code, "error": None, "resolved": None}
    except Exception as exc:
        return {"exit": 1, "error": last_line(exc), "resolved": None}
    return {"exit": 0, "error": None, "resolved": jsonable(dict(server_args.resolved_dict()))}


def simulator_resolve(argv: list[str]) -> Outcome:
    from pytest_sglang_perf.simulator.process.cli import prepare

    try:
        prepared = prepare(argv)
    except SystemExit as exc:
        return {"exit": exc.code, "error": None, "resolved": None}
    if isinstance(prepared, int):
        return {"exit": prepared, "error": None, "resolved": None}
    return {"exit": 0, "error": None, "resolved": jsonable(dict(prepared.resolution.args))}


def fork(job: Callable[[], Outcome]) -> tuple[int, int]:
    """Start `job` in a forked child; (the read end of the pipe its JSON outcome comes through, its pid). Its stderr
    (fd 2 and sys.stderr alike) is captured into the outcome's `stderr`."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read_end)
        code = 0
        try:
            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                result = job()
            result["stderr"] = err.getvalue()
            os.write(write_end, json.dumps(result).encode())
        except BaseException:
            traceback.print_exc()
            code = 3
        finally:
            os._exit(code)
    os.close(write_end)
    return read_end, pid


def ended(data: bytes, pid: int) -> Outcome:
    """A child's outcome, once its pipe is closed (its own JSON, or why there is none)."""
    _, status = os.waitpid(pid, 0)
    if status != 0 or not data:
        return {"exit": -1, "error": f"resolution child failed (wait status {status})", "stderr": "", "resolved": None}
    result: Outcome = json.loads(data)
    return result


def in_child(resolve: Callable[[list[str]], Outcome], argv: list[str]) -> Outcome:
    """Run `resolve(argv)` in a forked child and wait for its outcome."""
    read_end, pid = fork(lambda: resolve(argv))
    data = bytearray()
    with os.fdopen(read_end, "rb") as pipe:
        while chunk := pipe.read(1 << 16):
            data += chunk
    return ended(bytes(data), pid)


def main() -> int:
    for name in [key for key in os.environ if key.startswith("SGLANG_SIM_")]:
        del os.environ[name]
    cases = json.load(sys.stdin)["cases"]
    import sglang.srt.arg_groups.pipeline
    import sglang.srt.server_args

    del sglang  # imported once here, before forking, so that no case pays for it

    results = [{"sglang": in_child(sglang_resolve, argv), "simulator": in_child(simulator_resolve, argv)}
               for argv in cases]
    json.dump({"results": results}, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
