"""How SGLang 0.5.23 dies while starting, as its log shows it (docs/sglang-0.5.23.md §10).

A scheduler that raises during init logs `Scheduler hit an exception: <traceback>` and sends SIGQUIT to the main
process, whose launch-phase handler logs `Received sigquit from a child process. It usually means the child failed.`
and calls `kill_process_tree(os.getpid())`: every child gets SIGKILL, then the main process kills itself with
SIGKILL (managers/scheduler.py::run_scheduler_process, entrypoints/engine.py::launch_phase_sigquit_handler,
utils/common.py::kill_process_tree). A failed warmup takes the same way out after `Initialization failed. warmup
error: <traceback>` (entrypoints/http_server.py::_execute_server_warmup).

The tracebacks name SGLang's real call chain (functions and line numbers of the 0.5.23 wheel); the install prefix
is the one of SGLang's Docker images.
"""

from __future__ import annotations

from pytest_sglang_perf.sglang_facts.gpus import Gpu

SITE = "/usr/local/lib/python3.12/dist-packages/sglang/srt"
MSG_SBO_SM90 = ("SBO (single batch overlap) is not supported on SM90 GPUs with latest sgl-deep-gemm wheel. "
                "Please try removing --enable-single-batch-overlap argument.")
MSG_SIGQUIT = "Received sigquit from a child process. It usually means the child failed."

Frame = tuple[str, int, str, str]
"""(file under SITE, line, function, source line)."""

_SCHEDULER = ("managers/scheduler.py", 6362, "run_scheduler_process",
              "scheduler = Scheduler(server_args, port_args)")
_LOAD_CHAIN: tuple[Frame, ...] = (
    _SCHEDULER,
    ("managers/scheduler.py", 568, "__init__", "self.init_model_worker()"),
    ("managers/scheduler.py", 1130, "init_model_worker", "self.init_tp_model_worker()"),
    ("managers/scheduler.py", 1033, "init_tp_model_worker", "self.tp_worker = TpModelWorker(**worker_kwargs)"),
    ("managers/tp_worker.py", 319, "__init__", "self._init_model_runner()"),
    ("managers/tp_worker.py", 487, "_init_model_runner", "self._model_runner = ModelRunner("),
    ("model_executor/model_runner.py", 499, "__init__", "self.initialize()"),
    ("model_executor/model_runner.py", 715, "initialize", "self.load_model()"),
    ("model_executor/model_runner.py", 1312, "load_model", "loaded = load_model_with_memory_saver("),
)


class SchedulerCrash(Exception):
    """A scheduler rank raised during init: what its traceback shows. `all_ranks`: every rank raises it (a
    configuration error), or rank 0 only (an accident)."""

    def __init__(self, exc_type: str, message: str, frames: tuple[Frame, ...], all_ranks: bool = True) -> None:
        super().__init__(f"{exc_type}: {message}")
        self.exc_type, self.message, self.frames, self.all_ranks = exc_type, message, frames, all_ranks

    def __str__(self) -> str:
        return f"{self.exc_type}: {self.message}"

    def traceback(self) -> str:
        lines = ["Traceback (most recent call last):"]
        for file, line, function, source in self.frames:
            lines += [f'  File "{SITE}/{file}", line {line}, in {function}', f"    {source}"]
        return "\n".join([*lines, str(self)])


def sbo_on_sm90() -> SchedulerCrash:
    """layers/moe/utils.py::initialize_moe_config, run by Scheduler.init_moe_gemm_config for every model whose text
    config has an MoE top-k attribute (docs/sglang-0.5.23.md §8.5, §11 item 15)."""
    frames = (_SCHEDULER, ("managers/scheduler.py", 558, "__init__", "self.init_moe_gemm_config()"),
              ("managers/scheduler.py", 1008, "init_moe_gemm_config", "initialize_moe_config()"),
              ("layers/moe/utils.py", 509, "initialize_moe_config", "raise ValueError("))
    return SchedulerCrash("ValueError", MSG_SBO_SM90, frames)


def out_of_memory_while_loading(gpu: Gpu, requested_gib: float) -> SchedulerCrash:
    """The `crash-at-boot` fault: a CUDA out-of-memory error while loading the weights, on rank 0."""
    free = max(0.01, gpu.free_gib * 0.02)
    message = (f"CUDA out of memory. Tried to allocate {requested_gib:.2f} GiB. GPU 0 has a total capacity of "
               f"{gpu.total_gib:.2f} GiB of which {free:.2f} GiB is free. Of the allocated memory "
               f"{gpu.total_gib - gpu.reserved_gib - free:.2f} GiB is allocated by PyTorch. "
               "(simulated: --sim-fault crash-at-boot)")
    return SchedulerCrash("torch.OutOfMemoryError", message, _LOAD_CHAIN, all_ranks=False)


def not_enough_memory(message: str) -> SchedulerCrash:
    """mem_cache/kv_cache_configurator.py: no memory left for the KV cache."""
    frames = (*_LOAD_CHAIN[:3], ("managers/scheduler.py", 1137, "init_model_worker", "self.init_memory_pools()"))
    return SchedulerCrash("RuntimeError", message, frames)


def warmup_traceback(status: int, body: str) -> str:
    """`Initialization failed. warmup error: ...` after the warmup request came back with `status`."""
    return "\n".join([
        "Traceback (most recent call last):",
        f'  File "{SITE}/entrypoints/http_server.py", line 2501, in _execute_server_warmup',
        '    assert res.status_code == 200, f"{res.text}"',
        f"AssertionError: {body}",
    ]) if status != 200 else ""


def kill_tree_line(pid: int) -> str:
    return f"kill_process_tree called: parent_pid={pid}, include_parent=True, pid={pid}"
