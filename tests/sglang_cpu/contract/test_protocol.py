"""The simulator's chat responses in SGLang 0.5.23's own wire format, checked with SGLang's own code.

Every response of a real simulator process must validate against SGLang's pydantic classes
(`sglang.srt.entrypoints.openai.protocol`) *and* re-serialise byte for byte as SGLang writes it: content, role and
finish chunks through `sse_utils.build_sse_content` (msgspec), the `choices: []` sglext and usage chunks through
`ChatCompletionStreamResponse.model_dump_json()`, a non-streamed body through
`ChatCompletionResponse.model_dump_json(by_alias=True)` (`utils/json_response.py::model_json_response`), an error
through `ErrorResponse.model_dump()`. So a missing, extra, renamed, retyped or reordered field fails here.
"""

from __future__ import annotations

import contextlib
import http.client
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from pytest_sglang_perf.server.launcher import ServerProcess

SIM = ("-m", "pytest_sglang_perf.simulator", "--sim-boot-seconds", "0.2", "--sim-decode-tok-s", "2000",
       "--sim-ttft", "0.01", "--skip-server-warmup")
SPEC = ("--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4")
MESSAGES = [{"role": "user", "content": "Write a red-black tree in Python."}]
REQUEST_TIMEOUT = 30.0


@dataclass(frozen=True)
class Reply:
    status: int
    content_type: str
    body: bytes

    def events(self) -> list[bytes]:
        """SSE events without the trailing blank line; the stream must end with one."""
        assert self.body.endswith(b"\n\n"), self.body[-200:]
        return self.body[:-2].split(b"\n\n")


def post_chat(server: ServerProcess, payload: Mapping[str, Any], content_type: str = "application/json") -> Reply:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=REQUEST_TIMEOUT)
    try:
        conn.request("POST", "/v1/chat/completions", body=orjson.dumps(payload), headers={"Content-Type": content_type})
        response = conn.getresponse()
        return Reply(response.status, response.getheader("Content-Type") or "", response.read())
    finally:
        conn.close()


def flush_cache(server: ServerProcess) -> int:
    """POST /flush_cache (the server is idle between these requests); the HTTP status."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=REQUEST_TIMEOUT)
    try:
        conn.request("POST", "/flush_cache?timeout=30")
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


@pytest.fixture(scope="module")
def protocol(require: Callable[..., None]) -> Any:
    require("sglang.srt.entrypoints.openai.protocol", "validating responses with SGLang's pydantic classes",
            load=True)
    import sglang.srt.entrypoints.openai.protocol as module

    return module


@pytest.fixture(scope="module")
def build_sse_content(protocol: Any) -> Callable[..., str]:
    """SGLang's own SSE chunk writer (requires what `protocol` requires)."""
    from sglang.srt.entrypoints.openai.sse_utils import build_sse_content as build

    built: Callable[..., str] = build
    return built


@pytest.fixture(scope="module")
def servers(sim_model: Path, tmp_path_factory: pytest.TempPathFactory,
            server_process: Callable[..., contextlib.AbstractContextManager[ServerProcess]]) -> Iterator[
                dict[str, ServerProcess]]:
    """Two simulators: NEXTN speculative decoding with --enable-cache-report, and a plain one."""
    logs = tmp_path_factory.mktemp("sim-logs")
    base = (sys.executable, *SIM, "--model-path", str(sim_model))
    with contextlib.ExitStack() as stack:
        spec = stack.enter_context(server_process("spec", (*base, *SPEC, "--enable-cache-report"), logs / "spec.log",
                                                  30.0))
        plain = stack.enter_context(server_process("plain", base, logs / "plain.log", 30.0))
        yield {"spec": spec, "plain": plain}


def _chunk(event: bytes) -> tuple[bytes, dict[str, Any]]:
    assert event.startswith(b"data: "), event[:100]
    payload = event[len(b"data: "):]
    return payload, orjson.loads(payload)


def _as_sglang_writes_it(protocol: Any, build_sse_content: Callable[..., str], payload: bytes) -> bytes:
    """The chunk SGLang would send for the same content (validating it on the way)."""
    chunk = protocol.ChatCompletionStreamResponse.model_validate_json(payload)
    if not chunk.choices:
        return str(chunk.model_dump_json()).encode()
    (choice,) = chunk.choices
    usage = None if chunk.usage is None else chunk.usage.model_dump()
    delta = choice.delta
    text = build_sse_content(
        chunk_id=chunk.id, created=chunk.created, model=chunk.model, index=choice.index, role=delta.role,
        content=delta.content, reasoning_content=delta.reasoning_content, finish_reason=choice.finish_reason,
        logprobs=choice.logprobs, matched_stop=choice.matched_stop, usage=usage)
    assert text.startswith("data: ") and text.endswith("\n\n")
    return text[len("data: "):-2].encode()


def _stream(protocol: Any, build: Callable[..., str], reply: Reply) -> list[dict[str, Any]]:
    """Every chunk checked against SGLang's own serialisation; returns them decoded. Ends with [DONE]."""
    assert reply.status == 200, reply.body[:500]
    assert reply.content_type == "text/event-stream; charset=utf-8"
    events = reply.events()
    assert events[-1] == b"data: [DONE]"
    chunks = []
    for event in events[:-1]:
        payload, chunk = _chunk(event)
        assert payload == _as_sglang_writes_it(protocol, build, payload)
        chunks.append(chunk)
    return chunks


def _kinds(chunks: list[dict[str, Any]]) -> list[str]:
    """role, content, finish, sglext, usage: the order SGLang's serving_chat.py sends them in."""
    kinds = []
    for chunk in chunks:
        if not chunk["choices"]:
            kinds.append("sglext" if "sglext" in chunk else "usage")
            continue
        choice = chunk["choices"][0]
        kinds.append("finish" if choice["finish_reason"] else "role" if "role" in choice["delta"] else "content")
    return kinds


def _collapsed(kinds: list[str]) -> list[str]:
    return [kind for i, kind in enumerate(kinds) if i == 0 or kinds[i - 1] != kind]


def _request(stream: bool, **extra: Any) -> dict[str, Any]:
    return {"model": "tiny", "messages": MESSAGES, "max_tokens": 48, "stream": stream, "seed": 7, **extra}


STREAM_CASES: dict[str, tuple[str, dict[str, Any], list[str]]] = {
    "spec-usage-details": ("spec", {"ignore_eos": True, "return_spec_tokens_details": True,
                                    "stream_options": {"include_usage": True}},
                           ["role", "content", "finish", "sglext", "usage"]),
    "spec-continuous-usage": ("spec", {"ignore_eos": True, "stream_options": {"include_usage": True,
                                                                              "continuous_usage_stats": True}},
                              ["role", "content", "finish", "usage"]),
    "spec-no-usage": ("spec", {"ignore_eos": True}, ["role", "content", "finish"]),
    "plain-natural-stop": ("plain", {"return_spec_tokens_details": True, "stream_options": {"include_usage": True}},
                           ["role", "content", "finish", "usage"]),
    "plain-continuous-usage": ("plain", {"ignore_eos": True, "stream_options": {"include_usage": True,
                                                                                "continuous_usage_stats": True}},
                               ["role", "content", "finish", "usage"]),
}


@pytest.mark.parametrize("case", list(STREAM_CASES))
def test_stream_chunks_are_sglangs(case: str, servers: Mapping[str, ServerProcess], protocol: Any,
                                   build_sse_content: Callable[..., str]) -> None:
    server_name, extra, kinds = STREAM_CASES[case]
    chunks = _stream(protocol, build_sse_content, post_chat(servers[server_name], _request(True, **extra)))
    assert _collapsed(_kinds(chunks)) == kinds
    assert len({(chunk["id"], chunk["created"], chunk["model"]) for chunk in chunks}) == 1
    assert chunks[0]["model"] == "tiny"
    finish = next(chunk["choices"][0] for chunk in chunks if chunk["choices"] and chunk["choices"][0]["finish_reason"])
    if extra.get("ignore_eos"):
        assert (finish["finish_reason"], finish["matched_stop"]) == ("length", None)
    else:
        assert finish["finish_reason"] == "stop" and isinstance(finish["matched_stop"], int)


def test_spec_details_and_usage_agree(servers: Mapping[str, ServerProcess], protocol: Any,
                                      build_sse_content: Callable[..., str]) -> None:
    extra = {"ignore_eos": True, "return_spec_tokens_details": True, "stream_options": {"include_usage": True}}
    chunks = _stream(protocol, build_sse_content, post_chat(servers["spec"], _request(True, **extra)))
    details = protocol.SpecTokensDetails.model_validate(chunks[-2]["sglext"]["spec_tokens_details"])
    usage = protocol.UsageInfo.model_validate(chunks[-1]["usage"])
    assert usage.completion_tokens == 48 and usage.total_tokens == usage.prompt_tokens + 48
    assert usage.prompt_tokens_details is not None  # --enable-cache-report
    assert details.spec_verify_ct > 0
    assert details.spec_accept_length == pytest.approx(usage.completion_tokens / details.spec_verify_ct)
    assert details.spec_num_proposed_drafts == details.spec_verify_ct * (4 - 1)


def test_continuous_usage_counts_up(servers: Mapping[str, ServerProcess], protocol: Any,
                                    build_sse_content: Callable[..., str]) -> None:
    extra = {"ignore_eos": True, "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    assert flush_cache(servers["spec"]) == 200  # the simulator caches prompts as SGLang does: start cold
    chunks = _stream(protocol, build_sse_content, post_chat(servers["spec"], _request(True, **extra)))
    counts = [chunk["usage"]["completion_tokens"] for chunk in chunks if chunk["choices"] and chunk.get("usage")]
    assert counts == sorted(counts) and counts[-1] == 48
    assert all(chunk["usage"]["prompt_tokens_details"] == {"cached_tokens": 0} for chunk in chunks
               if chunk.get("usage"))


@pytest.mark.parametrize(("server_name", "details"), [("spec", True), ("spec", False), ("plain", True)])
def test_non_streamed_body_is_sglangs(server_name: str, details: bool, servers: Mapping[str, ServerProcess],
                                      protocol: Any) -> None:
    reply = post_chat(servers[server_name], _request(False, ignore_eos=True, return_spec_tokens_details=details))
    assert reply.status == 200 and reply.content_type == "application/json"
    response = protocol.ChatCompletionResponse.model_validate_json(reply.body)
    assert reply.body == response.model_dump_json(by_alias=True).encode()
    assert response.usage.completion_tokens == 48 and response.choices[0].finish_reason == "length"
    spec = response.sglext.spec_tokens_details if response.sglext is not None else None
    assert (spec is not None) == (server_name == "spec" and details)


@pytest.mark.parametrize(("payload", "content_type"), [
    ({"model": "tiny", "messages": MESSAGES}, "text/plain"),
    ({"model": "tiny"}, "application/json"),
    ({"model": "tiny", "messages": MESSAGES, "max_tokens": -1}, "application/json"),
])
def test_error_body_is_sglangs(payload: Mapping[str, Any], content_type: str, servers: Mapping[str, ServerProcess],
                               protocol: Any) -> None:
    reply = post_chat(servers["plain"], payload, content_type)
    assert reply.status == 400 and reply.content_type == "application/json"
    error = protocol.ErrorResponse.model_validate_json(reply.body)
    assert orjson.loads(reply.body) == error.model_dump() and error.code == 400
