"""inspection.inspect_server: the glue that reads a live server's log and /server_info after its boot."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from pytest_sglang_perf.config.settings import Variant
from pytest_sglang_perf.server.boot import RunningServer
from pytest_sglang_perf.server.inspection import inspect_server
from pytest_sglang_perf.server.logscan import first_rank_messages
from pytest_sglang_perf.server.plan import ServerPlan
from pytest_sglang_perf.sglang_facts.parsers import flag_table_parser

KEY = "sk-inspect-42"
LOG = "\n".join([
    "# pytest-sglang-perf [2026-11-29 10:00:00] v: python -m sglang.launch_server ...",
    "[2026-11-29 10:00:01] Breakable CUDA graph is incompatible with multimodal model; disabling prefill CUDA graph.",
    "[2026-11-29 10:00:05 TP0] Disable prefill CUDA graph because the target model does not have a 'layers' "
    "attribute",
    "[2026-11-29 10:00:05 TP1] Disable prefill CUDA graph because the target model does not have a 'layers' "
    "attribute",
    "[2026-11-29 10:00:09] Engine startup timings (s): load_weight=1.50, kv_cache_allocation=0.20, "
    "scheduler_e2e=9.00, cuda_graph={prefill=0.00, decode=4.00, target_verify=0.00, draft_prefill=0.00, "
    "draft_decode=0.00, draft_extend=0.00}, tokenizer_e2e=9.10",
])
INFO: dict[str, Any] = {
    "version": "0.5.23", "device": "cuda", "random_seed": 0, "api_key": KEY, "disable_overlap_schedule": False,
    "launch_command": f"python -m sglang.launch_server --api-key {KEY} --random-seed 0",
    "cuda_graph_config": {"decode": {"backend": "full", "max_bs": 48}, "prefill": {"backend": "disabled"}},
    "internal_states": [{"api_key": KEY, "effective_max_running_requests_per_dp": 48}],
}


class _Handler(BaseHTTPRequestHandler):
    doc: ClassVar[Mapping[str, Any] | None] = INFO
    seen: ClassVar[list[str | None]] = []

    def do_GET(self) -> None:
        type(self).seen.append(self.headers.get("Authorization"))
        body = json.dumps(self.doc).encode() if self.doc is not None and self.path == "/server_info" else b""
        self.send_response(200 if body else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def http_server() -> Iterator[tuple[str, type[_Handler]]]:
    handler = type("Handler", (_Handler,), {"seen": [], "doc": INFO})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


def _server(url: str, args: tuple[str, ...]) -> tuple[ServerPlan, RunningServer]:
    plan = ServerPlan(variant=Variant("v", args), args=args, command=("x",), env={}, simulated=False,
                      api_key=KEY, uses_default_launcher=True)
    return plan, RunningServer(plan, url, 12.5, 1, Path("v.log"), log_text=lambda: LOG)


def test_reads_the_configuration_with_the_key_and_never_keeps_it(http_server: tuple[str, type[_Handler]]) -> None:
    url, handler = http_server
    plan, server = _server(url, ("--api-key", KEY, "--random-seed", "0"))
    config, facts = inspect_server("v", plan, server, flag_table_parser(), [])
    assert handler.seen == [f"Bearer {KEY}"]
    assert facts.graph_capture_seconds == 4.0 and facts.load_weight == 1.5
    assert [(o.flag, o.status.value) for o in config.flags] == [("--random-seed", "ok")]
    assert config.problems == (
        "SGLang switched off the prefill CUDA graph (on by default) because: Breakable CUDA graph is incompatible "
        "with multimodal model; disabling prefill CUDA graph. / Disable prefill CUDA graph because the target "
        "model does not have a 'layers' attribute",)
    assert KEY not in repr(config) and KEY not in json.dumps(config.to_dict()) and KEY not in json.dumps(config.info)


def test_a_server_without_server_info_cannot_be_verified(http_server: tuple[str, type[_Handler]]) -> None:
    url, handler = http_server
    handler.doc = None
    plan, server = _server(url, ("--random-seed", "0"))
    config, facts = inspect_server("v", plan, server, flag_table_parser(), [])
    assert config.unavailable == f"GET {url}/server_info answered HTTP 404"
    assert config.problems == (f"the effective configuration could not be read: GET {url}/server_info answered "
                               "HTTP 404",)
    assert facts.load_weight == 1.5  # the log still tells the startup costs


def test_an_unknown_shape_is_reported_not_raised(http_server: tuple[str, type[_Handler]]) -> None:
    """A /server_info whose graph plan is not an object (another SGLang, a proxy) must not crash the session."""
    url, handler = http_server
    handler.doc = {**INFO, "cuda_graph_config": "n/a"}
    plan, server = _server(url, ("--random-seed", "0"))
    config, _ = inspect_server("v", plan, server, flag_table_parser(), [])
    assert config.unavailable is not None and "shape this plugin does not know" in config.unavailable


def test_log_messages_keep_the_first_rank_only() -> None:
    messages = first_rank_messages(LOG)
    assert sum("layers" in m for m in messages) == 1
    assert messages[1].startswith("Breakable CUDA graph is incompatible")
