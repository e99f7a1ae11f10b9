"""`--api-key` and `--enable-metrics`: the simulator next to a real SGLang 0.5.23 CPU server started with both.

Auth (docs/sglang-0.5.23.md §2.2): the same 401 answers, and /health, /ready, /metrics open. Metrics (§6): every family
the simulator exports exists in SGLang with the same type, HELP text, label names and histogram buckets. /generate's
meta_info with request time stats (§4.1): the same keys in the final and the intermediate objects.
"""

from __future__ import annotations

import contextlib
import http.client
import re
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

from pytest_sglang_perf.server.launcher import ServerProcess

KEY = "sk-contract"
FLAGS = ("--device", "cpu", "--load-format", "dummy", "--max-total-tokens", "32768", "--random-seed", "0",
         "--enable-metrics", "--api-key", KEY)
REAL_BOOT_TIMEOUT = 300.0
REQUEST_TIMEOUT = 60.0
AUTH = {"Authorization": f"Bearer {KEY}"}
PROTECTED = (("GET", "/v1/models"), ("GET", "/model_info"), ("GET", "/server_info"), ("GET", "/flush_cache"),
             ("POST", "/generate"), ("POST", "/v1/chat/completions"))
OPEN = ("/health", "/ready", "/metrics")
LABEL_DIFFERENCES = {"sglang:http_requests_active": "SGLang's gauge is per endpoint too (same label names)"}


@dataclass
class Family:
    kind: str = ""
    help: str = ""
    labels: set[frozenset[str]] = field(default_factory=set)
    buckets: set[str] = field(default_factory=set)


def parse_metrics(text: str) -> dict[str, Family]:
    families: dict[str, Family] = {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _, help_text = line[len("# HELP "):].partition(" ")
            families.setdefault(name, Family()).help = help_text
        elif line.startswith("# TYPE "):
            name, _, kind = line[len("# TYPE "):].partition(" ")
            families.setdefault(name, Family()).kind = kind
        elif line and not line.startswith("#"):
            _sample(families, line)
    return families


def _sample(families: dict[str, Family], line: str) -> None:
    match = re.match(r"(?P<name>[^{ ]+)(?:\{(?P<labels>[^}]*)\})? ", line)
    assert match is not None, line
    name, labels = match["name"], dict(re.findall(r'(\w+)="([^"]*)"', match["labels"] or ""))
    base = re.sub(r"_(bucket|sum|count)$", "", name) if name not in families else name
    family = families.setdefault(base, Family())
    if "le" in labels:
        family.buckets.add(labels.pop("le"))
    family.labels.add(frozenset(labels))


@dataclass(frozen=True)
class Served:
    server: ServerProcess

    def call(self, method: str, path: str, payload: Any = None,
             headers: Mapping[str, str] | None = None) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=REQUEST_TIMEOUT)
        try:
            body = None if payload is None else orjson.dumps(payload)
            all_headers = {**({"Content-Type": "application/json"} if body else {}), **(headers or {})}
            conn.request(method, path, body=body, headers=all_headers)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()


@pytest.fixture(scope="module")
def pair(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory, require: Callable[..., None],
         server_process: Callable[..., contextlib.AbstractContextManager[ServerProcess]]) -> Iterator[
             dict[str, Served]]:
    for module in ("transformers", "vllm", "uvicorn", "prometheus_client"):
        require(module, "serving real SGLang on CPU with --enable-metrics")
    logs = tmp_path_factory.mktemp("metrics-auth-logs")
    common = ("--model-path", str(tiny_model), *FLAGS)
    commands = {"sglang": (sys.executable, "-m", "sglang.launch_server", *common),
                "simulator": (sys.executable, "-m", "pytest_sglang_perf.simulator", *common, "--sim-boot-seconds",
                              "0.2")}
    timeouts = {"sglang": REAL_BOOT_TIMEOUT, "simulator": 30.0}
    env = {"sglang": {"HF_HUB_OFFLINE": "1"}, "simulator": {}}
    with contextlib.ExitStack() as stack:
        yield {name: Served(stack.enter_context(server_process(name, command, logs / f"{name}.log", timeouts[name],
                                                               env=env[name])))
               for name, command in commands.items()}


@pytest.mark.parametrize(("method", "path"), PROTECTED, ids=[path for _, path in PROTECTED])
def test_protected_without_the_key(method: str, path: str, pair: Mapping[str, Served]) -> None:
    payload = {"text": "hi"} if method == "POST" else None
    replies = {name: served.call(method, path, payload) for name, served in pair.items()}
    assert replies["simulator"] == replies["sglang"] == (401, b'{"error":"Unauthorized"}')
    wrong = {name: served.call(method, path, payload, {"Authorization": "Bearer nope"})[0]
             for name, served in pair.items()}
    assert wrong == {"sglang": 401, "simulator": 401}


def test_the_key_opens_them(pair: Mapping[str, Served]) -> None:
    for path in ("/v1/models", "/model_info", "/server_info"):
        assert {name: served.call("GET", path, headers=AUTH)[0] for name, served in pair.items()} == {
            "sglang": 200, "simulator": 200}, path


@pytest.mark.parametrize("path", OPEN)
def test_open_paths(path: str, pair: Mapping[str, Served]) -> None:
    assert {name: served.call("GET", path)[0] for name, served in pair.items()} == {"sglang": 200, "simulator": 200}


def _traffic(served: Served) -> None:
    """One streamed chat and one /generate, so that request metrics have samples."""
    chat = {"model": "tiny", "messages": [{"role": "user", "content": f"Say {uuid.uuid4().hex}"}], "max_tokens": 8,
            "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
    assert served.call("POST", "/v1/chat/completions", chat, AUTH)[0] == 200
    generate = {"text": f"Count to {uuid.uuid4().int}", "sampling_params": {"max_new_tokens": 8, "ignore_eos": True}}
    assert served.call("POST", "/generate", generate, AUTH)[0] == 200


def test_metric_families_are_sglangs(pair: Mapping[str, Served]) -> None:
    for served in pair.values():
        _traffic(served)
    families = {name: parse_metrics(served.call("GET", "/metrics")[1].decode()) for name, served in pair.items()}
    real, sim = families["sglang"], families["simulator"]
    assert sorted(set(sim) - set(real)) == []
    for name, ours in sim.items():
        theirs = real[name]
        assert (ours.kind, ours.help) == (theirs.kind, theirs.help), name
        assert ours.buckets == theirs.buckets, name
        assert {frozenset(labels) for labels in ours.labels} <= {frozenset(labels) for labels in theirs.labels} or \
            name in LABEL_DIFFERENCES, (name, ours.labels, theirs.labels)


def test_generate_meta_info_with_time_stats(pair: Mapping[str, Served]) -> None:
    """With --enable-metrics: scheduler time stats in every object, tokenizer ones in the final object."""
    objects = {}
    for name, served in pair.items():
        payload = {"text": f"Spell {uuid.uuid4().hex}", "stream": True,
                   "sampling_params": {"max_new_tokens": 6, "ignore_eos": True}}
        status, body = served.call("POST", "/generate", payload, AUTH)
        assert status == 200
        events = body.decode().strip().split("\n\n")
        assert events[-1] == "data: [DONE]"
        objects[name] = [orjson.loads(event.removeprefix("data: ")) for event in events[:-1]]
    for index in (0, 2, -1):
        real, sim = objects["sglang"][index]["meta_info"], objects["simulator"][index]["meta_info"]
        assert sorted(set(sim) ^ set(real)) == [], index
