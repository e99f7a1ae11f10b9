"""The simulator's endpoints next to a real SGLang 0.5.23 server on CPU, launched the same way.

One real server per module (`python -m sglang.launch_server --model-path <tiny model> --device cpu --load-format
dummy`, ~30-50 s on 2 cores) and one simulator with the same flags. `/model_info`, `/v1/models`, `/server_info`
(with `internal_states`), chat responses and error bodies must have the same keys with the same JSON types, and the
startup log must give the plugin's log scanner the same facts. Values are compared where they do not depend on the
hardware or the timing. Every allowed difference is listed below with its reason; nothing is skipped silently.
"""

from __future__ import annotations

import contextlib
import http.client
import itertools
import re
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from pytest_sglang_perf.server.launcher import ServerProcess
from pytest_sglang_perf.server.startup import startup_facts

FLAGS = ("--device", "cpu", "--load-format", "dummy", "--max-total-tokens", "32768", "--random-seed", "0")
SIM_KNOBS = ("--sim-boot-seconds", "0.2")
REAL_BOOT_TIMEOUT = 300.0
REQUEST_TIMEOUT = 60.0
MESSAGES = [{"role": "user", "content": "Write a red-black tree in Python."}]

# Paths use "." between keys and "[]" for list items.
TYPE_DIFFERENCES = {
    # CPU vs GPU by nature
    "attention_backend": "SGLang resolves torch_native on CPU; the simulator leaves the GPU's choice unset (null)",
    "sampling_backend": "pytorch on CPU, flashinfer on CUDA; the simulator leaves it unset (null)",
    "mm_feature_transport": "'cpu' on a CPU device; the simulator leaves it unset (null)",
    "internal_states[].attention_backend": "as attention_backend",
    "internal_states[].sampling_backend": "as sampling_backend",
    "internal_states[].mm_feature_transport": "as mm_feature_transport",
    # resolved by SGLang hooks the simulator does not model (see test_resolution.py)
    "speculative_moe_runner_backend": "MoE runner selection (overrides.py), not simulated",
    "expert_distribution_recorder_buffer_size": "expert-distribution metrics hook (parallel_hook.py), not simulated",
    "internal_states[].speculative_moe_runner_backend": "as speculative_moe_runner_backend",
    "internal_states[].expert_distribution_recorder_buffer_size": "as expert_distribution_recorder_buffer_size",
}
VALUE_DIFFERENCES = {
    "embedding.bcg.capture_token_budget": "the prefill graph's max_bs: chunked_prefill_size, sized by device memory",
    "embedding.bcg.capture_batch_sizes": "the prefill graph's sizes, up to that budget",
}
VOLATILE = {"data[].created": "a timestamp (equal when both answer within the same second)"}
LAUNCHER_PHASES = ("launched", "warming_up")
"""Progress events the launcher makes itself (launching; a 503 from /ready), not read from the log."""
LOG_FACT_DIFFERENCES = {
    "available_gpu_mem": "a CPU server logs available_cpu_mem instead (logscan reads either)",
    "available_cpu_mem": "a GPU (and the simulator) logs available_gpu_mem instead",
}


def json_type(value: Any) -> str:
    for kind, name in ((type(None), "null"), (bool, "bool"), (int, "int"), (float, "float"), (str, "str"),
                       (list, "list"), (dict, "dict")):
        if isinstance(value, kind):
            return name
    raise TypeError(f"not a JSON value: {value!r}")


def shape_differences(real: Any, sim: Any, path: str = "") -> list[str]:
    """Paths where keys or JSON types differ (list items: every real item against the simulator's first)."""
    if json_type(real) != json_type(sim):
        return [f"{path or '<root>'}: {json_type(real)} in SGLang, {json_type(sim)} in the simulator"]
    if isinstance(real, dict):
        out = [f"{path}.{key}: missing in the simulator".lstrip(".") for key in real.keys() - sim.keys()]
        out += [f"{path}.{key}: not in SGLang".lstrip(".") for key in sim.keys() - real.keys()]
        for key in real.keys() & sim.keys():
            out += shape_differences(real[key], sim[key], f"{path}.{key}".lstrip("."))
        return out
    if isinstance(real, list) and real and sim:
        return [d for item in real for d in shape_differences(item, sim[0], f"{path}[]")]
    return []


def unlisted(differences: list[str], allowed: Mapping[str, str]) -> list[str]:
    return sorted(d for d in differences if d.split(":", 1)[0] not in allowed)


def value_differences(real: Any, sim: Any, path: str = "") -> list[str]:
    if isinstance(real, dict) and isinstance(sim, dict):
        return [d for key in real.keys() & sim.keys()
                for d in value_differences(real[key], sim[key], f"{path}.{key}".lstrip("."))]
    if isinstance(real, list) and isinstance(sim, list) and len(real) == len(sim) and real and \
            all(isinstance(item, dict) for item in real):
        return [d for a, b in zip(real, sim, strict=True) for d in value_differences(a, b, f"{path}[]")]
    return [] if real == sim else [f"{path}: {real!r} in SGLang, {sim!r} in the simulator"]


@dataclass(frozen=True)
class Served:
    server: ServerProcess
    phases: list[str]
    """The launcher's progress events, in order (ProgressEvent.phase)."""

    def get(self, path: str) -> tuple[int, Any]:
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=REQUEST_TIMEOUT)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            return response.status, orjson.loads(response.read())
        finally:
            conn.close()

    def post(self, payload: Any, content_type: str = "application/json") -> tuple[int, bytes]:
        status, _, body = self.call("POST", "/v1/chat/completions", payload, content_type)
        return status, body

    def call(self, method: str, path: str, payload: Any = None,
             content_type: str = "application/json") -> tuple[int, str, bytes]:
        """(status, Content-Type, body) of any request."""
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=REQUEST_TIMEOUT)
        try:
            body = None if payload is None else orjson.dumps(payload)
            conn.request(method, path, body=body, headers={"Content-Type": content_type} if body else {})
            response = conn.getresponse()
            return response.status, response.getheader("Content-Type") or "", response.read()
        finally:
            conn.close()


@pytest.fixture(scope="module")
def pair(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory, require: Callable[..., None],
         server_process: Callable[..., contextlib.AbstractContextManager[ServerProcess]]) -> Iterator[
             dict[str, Served]]:
    """{"sglang": a real SGLang CPU server, "simulator": the simulator}, same model and flags, both ready."""
    for module in ("transformers", "vllm", "uvicorn"):
        require(module, "serving real SGLang on CPU")
    logs = tmp_path_factory.mktemp("endpoint-logs")
    phases: dict[str, list[str]] = {"sglang": [], "simulator": []}
    common = ("--model-path", str(tiny_model), *FLAGS)
    commands = {"sglang": (sys.executable, "-m", "sglang.launch_server", *common),
                "simulator": (sys.executable, "-m", "pytest_sglang_perf.simulator", *common, *SIM_KNOBS)}
    timeouts = {"sglang": REAL_BOOT_TIMEOUT, "simulator": 30.0}
    env: dict[str, dict[str, str]] = {"sglang": {"HF_HUB_OFFLINE": "1"}, "simulator": {}}
    with contextlib.ExitStack() as stack:
        servers = {name: stack.enter_context(server_process(
            name, command, logs / f"{name}.log", timeouts[name], env=env[name],
            on_progress=lambda event, seen=phases[name]: seen.append(event.phase)))
            for name, command in commands.items()}
        yield {name: Served(server, phases[name]) for name, server in servers.items()}


def _both(pair: Mapping[str, Served], path: str) -> tuple[Any, Any]:
    (real_status, real), (sim_status, sim) = pair["sglang"].get(path), pair["simulator"].get(path)
    assert (real_status, sim_status) == (200, 200)
    return real, sim


@pytest.mark.parametrize("path", ["/model_info", "/v1/models", "/server_info"])
def test_same_keys_and_types(path: str, pair: Mapping[str, Served]) -> None:
    real, sim = _both(pair, path)
    differences = unlisted(shape_differences(real, sim), TYPE_DIFFERENCES)
    assert not differences, "\n".join(differences)


@pytest.mark.parametrize("path", ["/model_info", "/v1/models"])
def test_same_values(path: str, pair: Mapping[str, Served]) -> None:
    real, sim = _both(pair, path)
    differences = unlisted(value_differences(real, sim), {**VALUE_DIFFERENCES, **VOLATILE})
    assert not differences, "\n".join(differences)


def test_server_info_facts(pair: Mapping[str, Served]) -> None:
    real, sim = _both(pair, "/server_info")
    for key in ("version", "frontend", "status", "model_path", "served_model_name", "load_format", "random_seed",
                "max_running_requests", "speculative_algorithm", "decode_log_interval"):
        assert sim[key] == real[key], key
    assert sim["max_total_num_tokens"] == real["max_total_num_tokens"] == 32768  # --max-total-tokens is honoured
    assert sim["max_req_input_len"] == real["max_req_input_len"]
    assert len(sim["internal_states"]) == len(real["internal_states"]) == 1
    assert set(sim["startup_time"]) == set(real["startup_time"])
    ports = (f"--port {pair['sglang'].server.port}", f"--port {pair['simulator'].server.port}")
    assert sim["launch_command"].replace(ports[1], "--port P") == real["launch_command"].replace(ports[0], "--port P")


def test_every_allowed_difference_still_exists(pair: Mapping[str, Served]) -> None:
    """A listed difference that no longer shows is stale: drop it, so the lists stay the truth."""
    shapes = {d.split(":", 1)[0] for path in ("/model_info", "/v1/models", "/server_info")
              for d in shape_differences(*_both(pair, path))}
    values = {d.split(":", 1)[0] for path in ("/model_info", "/v1/models")
              for d in value_differences(*_both(pair, path))}
    assert sorted(set(TYPE_DIFFERENCES) - shapes) == []
    assert sorted(set(VALUE_DIFFERENCES) - values) == []


def _request(stream: bool, **extra: Any) -> dict[str, Any]:
    return {"model": "tiny", "messages": MESSAGES, "max_tokens": 12, "ignore_eos": True, "stream": stream, **extra}


def _kinds(chunks: list[Any]) -> list[str]:
    """role, content, finish, sglext or usage per chunk: serving_chat.py sends them in this order."""
    kinds = []
    for chunk in chunks:
        if not chunk["choices"]:
            kinds.append("sglext" if "sglext" in chunk else "usage")
        elif chunk["choices"][0]["finish_reason"]:
            kinds.append("finish")
        else:
            kinds.append("role" if "role" in chunk["choices"][0]["delta"] else "content")
    return kinds


def _collapsed(kinds: list[str]) -> list[str]:
    return [kind for i, kind in enumerate(kinds) if i == 0 or kinds[i - 1] != kind]


def _chunks(body: bytes) -> list[Any]:
    events = body.decode().strip().split("\n\n")
    assert events[-1] == "data: [DONE]"
    return [orjson.loads(event.removeprefix("data: ")) for event in events[:-1]]


@pytest.mark.parametrize("options", [{"include_usage": True}, {"include_usage": True, "continuous_usage_stats": True},
                                     {}], ids=["usage", "continuous-usage", "no-usage"])
def test_stream_has_the_same_chunks(options: Mapping[str, Any], pair: Mapping[str, Served]) -> None:
    """The same kinds of chunk in the same order, each kind with the same keys and types (texts differ)."""
    request = _request(True, stream_options=options, return_spec_tokens_details=True)
    replies = {name: served.post(request) for name, served in pair.items()}
    assert {name: status for name, (status, _) in replies.items()} == {"sglang": 200, "simulator": 200}
    real, sim = _chunks(replies["sglang"][1]), _chunks(replies["simulator"][1])
    kinds = {"sglang": _kinds(real), "simulator": _kinds(sim)}
    assert _collapsed(kinds["simulator"]) == _collapsed(kinds["sglang"])
    for kind in set(kinds["sglang"]):  # SGLang merges or holds back tokens (partial UTF-8): compare kind by kind
        first = {name: chunks[kinds[name].index(kind)] for name, chunks in (("sglang", real), ("simulator", sim))}
        assert shape_differences(first["sglang"], first["simulator"]) == [], kind


@pytest.mark.parametrize("details", [True, False])
def test_non_streamed_body_has_the_same_keys(details: bool, pair: Mapping[str, Served]) -> None:
    request = _request(False, return_spec_tokens_details=details)
    (real_status, real), (sim_status, sim) = (served.post(request) for served in pair.values())
    assert (real_status, sim_status) == (200, 200)
    assert shape_differences(orjson.loads(real), orjson.loads(sim)) == []


@pytest.mark.parametrize(("payload", "content_type", "same_message"), [
    ({"model": "tiny", "messages": MESSAGES}, "text/plain", True),
    (_request(False, max_tokens=-1), "application/json", True),
    ({"model": "tiny"}, "application/json", False),
], ids=["content-type", "negative-max-tokens", "missing-messages"])
def test_error_bodies(payload: Any, content_type: str, same_message: bool, pair: Mapping[str, Served]) -> None:
    """The missing-field message differs: SGLang's embeds FastAPI's source location and pydantic's input echo."""
    (real_status, real_body), (sim_status, sim_body) = (served.post(payload, content_type) for served in pair.values())
    real, sim = orjson.loads(real_body), orjson.loads(sim_body)
    assert (sim_status, shape_differences(real, sim)) == (real_status, [])
    if same_message:
        assert sim == real
    else:
        assert {**sim, "message": ""} == {**real, "message": ""}


PLUGIN_READS = {
    # pytest_sglang_perf/measurement/client.py::StreamAccumulator.feed_object and openai_client.py::_feed_chunk
    "content": ("choices", 0, "delta", "content"),
    "finish": ("choices", 0, "finish_reason"),
    "usage": ("usage", "completion_tokens"),
}
PLUGIN_READS_ALSO = {
    ("role", "choices", 0, "delta", "reasoning_content"): "read with content; null without a reasoning parser",
    ("usage", "usage", "prompt_tokens"): "read with completion_tokens",
}
NOT_ON_CPU = {
    "sglext.spec_tokens_details": "speculative decoding does not run on SGLang-CPU (sgl_kernel is CUDA-only), so "
                                  "the chunk never comes; test_protocol.py holds the simulator's to SGLang's classes",
}


def _dig(value: Any, path: tuple[str | int, ...]) -> Any:
    for key in path:
        value = value[key]
    return value


def test_keys_the_plugin_reads(pair: Mapping[str, Served]) -> None:
    """Each key the plugin's clients read: present in both servers' chunks with the same JSON type."""
    request = _request(True, stream_options={"include_usage": True}, return_spec_tokens_details=True)
    chunks = {name: _chunks(served.post(request)[1]) for name, served in pair.items()}
    reads = {**{(kind, *path): "" for kind, path in PLUGIN_READS.items()}, **PLUGIN_READS_ALSO}
    for kind, *path in reads:
        assert isinstance(kind, str)
        values = {name: _dig(items[_kinds(items).index(kind)], tuple(path)) for name, items in chunks.items()}
        assert json_type(values["simulator"]) == json_type(values["sglang"]), (kind, path, values)
    assert not any("sglext" in chunk for chunk in chunks["sglang"]), NOT_ON_CPU


def test_plugin_client_reads_both_alike(pair: Mapping[str, Served]) -> None:
    """The plugin's own streaming client (client.run_requests) on both: the same kind of record."""
    from pytest_sglang_perf.measurement.client import ChatRequest
    from pytest_sglang_perf.measurement.rounds import run_requests

    request = ChatRequest(model="tiny", prompt=MESSAGES[0]["content"], max_tokens=16, temperature=0.0, seed=1)
    records = {name: run_requests(served.server.base_url, request, count=1, warmup=0)[0]
               for name, served in pair.items()}
    real, sim = records["sglang"], records["simulator"]
    assert real.sample.completion_tokens == sim.sample.completion_tokens == 16
    assert real.sample.prompt_tokens > 0 and sim.sample.prompt_tokens > 0
    assert real.finish_reason == sim.finish_reason == "length"
    assert (real.sample.spec_verify_ct, sim.sample.spec_verify_ct) == (None, None)  # no speculative algorithm
    assert 0 < real.sample.chunks <= 16 and sim.sample.chunks == 16


def test_model_card_404(pair: Mapping[str, Served]) -> None:
    assert pair["simulator"].get("/v1/models/other") == pair["sglang"].get("/v1/models/other")


def test_log_gives_the_same_startup_facts(pair: Mapping[str, Served]) -> None:
    """What logscan.startup_facts (boot report, baselines) and the launcher's progress events read from each log."""
    facts = {name: startup_facts(served.server.log_text()).to_dict() for name, served in pair.items()}
    found = {name: {key for key, value in fact.items() if value is not None} for name, fact in facts.items()}
    assert sorted(found["sglang"] ^ found["simulator"]) == sorted(LOG_FACT_DIFFERENCES)
    assert facts["simulator"]["max_total_num_tokens"] == facts["sglang"]["max_total_num_tokens"] == 32768
    for key in ("context_len", "max_prefill_tokens"):
        assert facts["simulator"][key] == facts["sglang"][key], key
    assert set(facts["simulator"]["cuda_graph"]) == set(facts["sglang"]["cuda_graph"])
    logged = {name: [p for p in served.phases if p not in LAUNCHER_PHASES] for name, served in pair.items()}
    assert logged["sglang"][-1] == logged["simulator"][-1] == "ready"
    assert set(logged["sglang"]) <= set(logged["simulator"])


# ---- native /generate (docs/sglang-0.5.23.md §4) ------------------------------------------------


def _unique_text() -> str:
    """A prompt no earlier request sent: SGLang's prefix cache would otherwise fill cached_tokens_details."""
    return f"{uuid.uuid4().hex} is a number; describe it in words."


def _prefix_cache_hit(difference: str) -> bool:
    """CPU vs simulator by nature: the simulator has no prefix cache, so its `cached_tokens_details` is always
    null (no hit), while SGLang's radix cache can match a first token of an earlier prompt even with
    _unique_text() (a dict then, docs/sglang-0.5.23.md §4.1)."""
    return difference.endswith("meta_info.cached_tokens_details: dict in SGLang, null in the simulator")


def _generate(pair: Mapping[str, Served], payload: Mapping[str, Any]) -> dict[str, tuple[int, str, bytes]]:
    return {name: served.call("POST", "/generate", payload) for name, served in pair.items()}


def test_generate_single_and_batch_have_the_same_shape(pair: Mapping[str, Served]) -> None:
    params = {"max_new_tokens": 12, "ignore_eos": True, "temperature": 0}
    single = _generate(pair, {"text": _unique_text(), "sampling_params": params})
    batch = _generate(pair, {"text": [_unique_text(), _unique_text()], "sampling_params": params})
    for replies in (single, batch):
        (real_status, real_type, real), (sim_status, sim_type, sim) = replies["sglang"], replies["simulator"]
        assert (real_status, sim_status, real_type, sim_type) == (200, 200, "application/json", "application/json")
        differences = shape_differences(orjson.loads(real), orjson.loads(sim))
        assert [d for d in differences if not _prefix_cache_hit(d)] == []
    answer = orjson.loads(single["simulator"][2])
    assert answer["meta_info"]["finish_reason"] == {"type": "length", "length": 12}
    assert len(answer["output_ids"]) == answer["meta_info"]["completion_tokens"] == 12


def _generate_stream(served: Served, text: str) -> list[dict[str, Any]]:
    status, content_type, body = served.call("POST", "/generate", {
        "text": text, "stream": True, "sampling_params": {"max_new_tokens": 8, "ignore_eos": True}})
    assert (status, content_type) == (200, "text/event-stream; charset=utf-8")
    return _chunks(body)


def test_generate_stream_is_cumulative_with_the_same_keys(pair: Mapping[str, Served]) -> None:
    """Non-final objects carry no finish reason, e2e_latency or weight_versions; the final one does."""
    objects = {name: _generate_stream(served, _unique_text()) for name, served in pair.items()}
    for name, chunks in objects.items():
        texts = [chunk["text"] for chunk in chunks]
        assert all(b.startswith(a) for a, b in itertools.pairwise(texts)), name
        assert chunks[-1]["meta_info"]["finish_reason"] == {"type": "length", "length": 8}, name
        assert all(chunk["meta_info"]["finish_reason"] is None for chunk in chunks[:-1]), name
    real, sim = objects["sglang"], objects["simulator"]
    for real_object, sim_object in ((real[-1], sim[-1]), (real[1], sim[1])):  # last, and a middle object
        differences = shape_differences(real_object, sim_object)
        assert [d for d in differences if not _prefix_cache_hit(d)] == []


@pytest.mark.parametrize("payload", [{"sampling_params": {"max_new_tokens": 5}},
                                     {"text": "x", "sampling_params": {"max_new_tokens": -1}}],
                         ids=["no-prompt", "negative-max-new-tokens"])
def test_generate_errors(payload: Mapping[str, Any], pair: Mapping[str, Served]) -> None:
    replies = _generate(pair, payload)
    assert replies["simulator"] == replies["sglang"]


# ---- /flush_cache (docs/sglang-0.5.23.md §2.2) --------------------------------------------------


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_flush_cache(method: str, pair: Mapping[str, Served]) -> None:
    replies = {name: served.call(method, "/flush_cache") for name, served in pair.items()}
    assert replies["simulator"][::2] == replies["sglang"][::2]  # status and text (Content-Type: text/plain vs none)
    assert replies["sglang"][0] == 200


# ---- batch log lines (docs/sglang-0.5.23.md §7.2, §7.3) -----------------------------------------


def _line_shape(line: str) -> str:
    """A log line without its timestamp, numbers replaced by N and booleans by B: what a log parser relies on."""
    message = line.split("] ", 1)[1]
    return re.sub(r"\b(?:True|False)\b", "B", re.sub(r"\d+(?:\.\d+)?", "N", message))


def _last(log: str, prefix: str) -> str | None:
    lines = [line for line in log.splitlines() if "] " in line and line.split("] ", 1)[1].startswith(prefix)]
    return lines[-1] if lines else None


def test_prefill_and_decode_lines_have_the_same_format(pair: Mapping[str, Served]) -> None:
    """Both servers run with --device cpu, so both label the graph field `cpu graph`."""
    for served in pair.values():  # 60 new tokens: at least one full window of 40 decode steps
        status, _, _ = served.call("POST", "/generate", {
            "text": _unique_text(), "sampling_params": {"max_new_tokens": 60, "ignore_eos": True}})
        assert status == 200
    logs = {name: served.server.log_text() for name, served in pair.items()}
    for prefix in ("Prefill batch, ", "Decode batch, "):
        lines = {name: _last(log, prefix) for name, log in logs.items()}
        assert lines["sglang"] is not None and lines["simulator"] is not None, prefix
        assert _line_shape(lines["simulator"]) == _line_shape(lines["sglang"])
