"""The bare-connection reader (measurement/wire.py): an SGLang-like answer, split at any byte, gives the same record
as whole; every bad answer gives the one-stream client's reason."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from pytest_sglang_perf.measurement.client import ChatRequest, RequestFailed, StreamRecord
from pytest_sglang_perf.measurement.wire import Endpoint, StreamProtocol

URL = "http://127.0.0.1:1/v1/chat/completions"
CHAT = ChatRequest(model="m", prompt="p", max_tokens=3, temperature=0.0, seed=0)
HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n\r\n"


class _Transport:
    def __init__(self) -> None:
        self.written = b""
        self.closed = False

    def write(self, data: bytes) -> None:
        self.written += data

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str) -> Any:
        return None


def _event(obj: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def _chunked(*events: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events) + b"0\r\n\r\n"


def _answer() -> bytes:
    deltas = [_event({"choices": [{"index": 0, "delta": {"content": word}, "finish_reason": None}]})
              for word in ("a", "b", "c")]
    usage = _event({"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 3}})
    return HEAD + _chunked(deltas[0], deltas[1] + deltas[2], usage, b"data: [DONE]\n\n")


async def _read(pieces: list[bytes], *, lose: bool = False) -> StreamRecord:
    protocol = StreamProtocol()
    protocol.connection_made(_Transport())  # type: ignore[arg-type]
    protocol.send(b"request", CHAT, URL)
    for piece in pieces:
        protocol.data_received(piece)
    if lose:
        protocol.connection_lost(None)
    return await protocol.done


def _pieces(data: bytes, cut: int) -> list[bytes]:
    return [data[i:i + cut] for i in range(0, len(data), cut)]


@pytest.mark.parametrize("cut", [1, 2, 3, 7, 64, 10_000])
def test_any_split_of_the_answer_reads_the_same(cut: int) -> None:
    record = asyncio.run(_read(_pieces(_answer(), cut)))
    assert record.text == "abc" and record.sample.completion_tokens == 3 and record.sample.chunks == 3
    assert record.finish_reason is None and record.sample.cached_tokens == 0


def test_an_error_status_says_sglangs_message() -> None:
    body = orjson.dumps({"object": "error", "message": "The model `x` does not exist."})
    answer = b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
        len(body), body)
    with pytest.raises(RequestFailed, match=r"HTTP 404 from POST .*: The model `x` does not exist\..*without /v1"):
        asyncio.run(_read(_pieces(answer, 5)))


def test_a_stream_cut_short_is_a_broken_connection() -> None:
    cut = _answer()[: len(HEAD) + 120]  # the first content event, then the connection closes
    with pytest.raises(RequestFailed, match=r"connection to .* broke after 1 content chunks: ConnectionResetError: "
                                            r"closed"):
        asyncio.run(_read([cut], lose=True))


def test_an_answer_that_is_not_a_stream_says_so() -> None:
    answer = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
    with pytest.raises(RequestFailed, match=r"expected a text/event-stream answer .* got application/json"):
        asyncio.run(_read([answer]))


def test_a_short_stream_fails_as_the_one_stream_client_does() -> None:
    usage = _event({"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 2}})
    delta = _event({"choices": [{"index": 0, "delta": {"content": "a"}, "finish_reason": "length"}]})
    answer = HEAD + _chunked(delta, usage, b"data: [DONE]\n\n")
    with pytest.raises(RequestFailed, match="short: asked 3, got 2"):
        asyncio.run(_read([answer]))


def test_the_request_is_one_write_with_the_key() -> None:
    endpoint = Endpoint("http://h:8/", "sk-1")
    request = endpoint.request(b'{"a":1}')
    assert request.startswith(b"POST /v1/chat/completions HTTP/1.1\r\nHost: h:8\r\n")
    assert b"Authorization: Bearer sk-1\r\n" in request and request.endswith(b"Content-Length: 7\r\n\r\n{\"a\":1}")
    with pytest.raises(ValueError, match="expected an http"):
        Endpoint("unix:///x", None)
