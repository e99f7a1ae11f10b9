"""The `openai` package bound to a server, and the cross-check that sends our request through it."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator

import orjson
import pytest
from sglang_stub import Script, StubServer

from pytest_sglang_perf.measurement.client import ChatRequest, RequestFailed
from pytest_sglang_perf.measurement.openai_client import cross_check, make_openai_client
from pytest_sglang_perf.measurement.rounds import run_requests

REQUEST = ChatRequest(model="stub-model", prompt="Write a red-black tree.", max_tokens=24, temperature=0.6, seed=7)


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer() as server:
        yield server


def test_client_is_bound_to_the_server_v1_api(stub: StubServer) -> None:
    stub.script.api_key = "sekrit"
    with make_openai_client(stub.url + "/", api_key="sekrit") as client:
        assert str(client.base_url) == stub.url + "/v1/"
        assert [m.id for m in client.models.list()] == ["stub-model"]
        assert client.max_retries == 0


def test_cross_check_agrees_with_our_client(stub: StubServer) -> None:
    stub.script = Script(ttft=0.03, chunks=12, interval=0.003, tokens_per_chunk=2, spec_verify_ct=5)
    ours = run_requests(stub.url, REQUEST, count=1, warmup=0)[0]
    theirs = cross_check(stub.url, REQUEST)
    assert stub.received[1].body == stub.received[0].body
    assert (theirs.text, theirs.finish_reason) == (ours.text, ours.finish_reason)
    same = ("completion_tokens", "prompt_tokens", "chunks", "spec_verify_ct", "spec_accept_length")
    assert [getattr(theirs.sample, f) for f in same] == [getattr(ours.sample, f) for f in same]
    assert len(theirs.chunk_times) == 12 and theirs.sample.ttft > 0


def test_cross_check_sends_the_api_key(stub: StubServer) -> None:
    stub.script = Script(chunks=24, api_key="sekrit")
    assert cross_check(stub.url, REQUEST, api_key="sekrit").sample.completion_tokens == 24
    assert stub.received[0].headers["Authorization"] == "Bearer sekrit"


def test_cross_check_validates_like_our_client(stub: StubServer) -> None:
    stub.script = Script(chunks=5, reported_tokens=5, finish_reason="stop")
    with pytest.raises(RequestFailed, match=r"^short: asked 24, got 5 \(finish_reason=stop\)"):
        cross_check(stub.url, REQUEST)
    stub.script = Script(chunks=24, send_usage=False)
    with pytest.raises(RequestFailed, match=r"^server sent no usage"):
        cross_check(stub.url, REQUEST)


def test_cross_check_reports_status_and_stream_errors(stub: StubServer) -> None:
    body = orjson.dumps({"object": "error", "message": "bad seed", "type": "BadRequestError", "param": None,
                         "code": 400})
    stub.script = Script(status=400, error_body=body)
    with pytest.raises(RequestFailed) as info:
        cross_check(stub.url, REQUEST)
    assert (info.value.status, info.value.reason) == (400, f"HTTP 400 from POST {stub.url}/v1/chat/completions: "
                                                           "bad seed")
    stub.script = Script(error_after=2)
    with pytest.raises(RequestFailed, match=r"^server reported an error mid-stream: Generation aborted: out of"):
        cross_check(stub.url, REQUEST)


def test_cross_check_connection_refused() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(RequestFailed, match=f"^cannot connect to http://127.0.0.1:{port}/v1/chat/completions: "):
        cross_check(f"http://127.0.0.1:{port}", REQUEST)


def test_missing_openai_package_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(ImportError, match="pip install openai"):
        make_openai_client("http://127.0.0.1:1")
