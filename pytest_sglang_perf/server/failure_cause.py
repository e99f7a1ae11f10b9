"""Why a server failed: the line of its log that says so, and what kind of failure that is.

Read from the failed attempt's whole log (a cause may be far from its end: SGLang's own diagnostics, a process
tree's kill and other ranks' tracebacks follow it), with the wordings seen in published GPU logs
(tests/data/sglang_gpu_logs/) and in SGLang's source (docs/sglang-versions.md, "Log lines as GPU runners print
them"). Plain text in, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pytest_sglang_perf.server.logscan import strip_prefix

_SIMULATOR_CAUSE = re.compile(r"^simulator: \S.*$")
"""The simulator's own error lines (a bad `--sim-*` knob or SGLANG_SIM_* variable): printed first, cause first."""
_ARGPARSE_ERROR = re.compile(r"^[\w. /-]+: error: \S.*$")
"""argparse's last line after its usage text (`sglang serve: error: unrecognized arguments: ...`)."""
_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?(?:[A-Z]\w*)?(?:Error|Exception)(?::\s.*)?$")
"""The last line of a Python traceback (`OSError: Can't load the configuration of ...`)."""


def boot_failure_cause(log_tail: Sequence[str]) -> str | None:
    """The line of a failed server's log that says why, to show above the tail (pass the whole log's lines: a cause
    may be far from the end): the simulator's first own error line, else argparse's error line (last, after up to
    hundreds of usage lines), else a hard crash's `Fatal Python error` (the first: a dying process group prints
    several), else NCCL's first `NCCL WARN` line, else the last line of a traceback, of a C++ exception
    (`what(): ...`), of a kernel library's `CUDA error (...): ...` or of SGLang's `... failed with error: ...`, else
    SGLang's `Scheduler hit an exception` line (a traceback whose end is not in the log)."""
    lines = [strip_prefix(line) for line in log_tail]
    simulator = next((line for line in lines if _SIMULATOR_CAUSE.match(line)), None)
    if simulator is not None:
        return simulator
    argparse_error = [line for line in lines if _ARGPARSE_ERROR.match(line)]
    if argparse_error:
        return argparse_error[-1]
    for pattern in (_FATAL, _NCCL_WARN):
        found = next((line for line in lines if pattern.search(line)), None)
        if found is not None:
            return found
    for pattern in (_EXCEPTION, _CXX_WHAT, _CUDA_ERROR, _FAILED_WITH, _SCHEDULER_EXCEPTION):
        last = [line for line in lines if pattern.search(line)]
        if last:
            return last[-1]
    return None


_FATAL = re.compile(r"^Fatal Python error: \S")
_NCCL_WARN = re.compile(r"\bNCCL WARN\b")
_NCCL = re.compile(r"\bNCCL WARN\b|\bNCCL error\b")
_CXX_WHAT = re.compile(r"^what\(\):\s+\S")
"""A C++ exception's message as `terminate called after throwing ...` prints it (the NCCL watchdog's CUDA error)."""
_CUDA_ERROR = re.compile(r"^CUDA [Ee]rror\b.*: \S")
"""A CUDA error a C++ kernel library prints itself (`CUDA error (get_mla_metadata.cu:93): no kernel image is available
for execution on the device`, FlashMLA on a GPU it was not built for; FlashInfer's `CUDA Error: an illegal memory
access was encountered ...`), no Python traceback after it."""
_FAILED_WITH = re.compile(r"\bfailed with error: \S")
"""SGLang's own line for a failed step (`Piecewise CUDA Graph failed with error: ...`)."""
_SCHEDULER_EXCEPTION = re.compile(
    r"\bhit an exception: |^Exception in (?:run_tp_server|ModelTpServer):|^router init state: Traceback")
"""SGLang's line before a scheduler's traceback: `Scheduler hit an exception: ...`; before 0.4 `Exception in
run_tp_server:` or `Exception in ModelTpServer:`, and SGLang 0.1's `router init state: Traceback ...` (published
2024 logs)."""
FAILURE_KINDS = (
    ("fatal_python_error", re.compile(r"^Fatal Python error")),
    ("nccl", _NCCL),
    ("oom", re.compile(r"out of memory|OutOfMemoryError|\bOOM\b", re.IGNORECASE)),
    ("cuda", re.compile(r"\bCUDA error\b|illegal memory access")),
    ("signal", re.compile(r"\bSIG[A-Z]+\b|\bkilled by signal\b", re.IGNORECASE)),
    ("exception", re.compile(r"(?:Error|Exception)\b|hit an exception|\bTraceback \(most recent|failed with error")),
)
"""A cause line's kind, the first that matches."""


def failure_kind(cause: str) -> str:
    """What kind of failure a cause line (boot_failure_cause) is: fatal_python_error, nccl, oom, cuda, signal,
    exception, or other."""
    return next((kind for kind, pattern in FAILURE_KINDS if pattern.search(cause)), "other")
