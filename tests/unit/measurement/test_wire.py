"""The bare-connection reader (measurement/wire.py): an SGLang-like answer, split at any byte, gives the same record
as whole, parsed as it comes or deferred; every bad answer gives the one-stream client's reason."""

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


async def _read(pieces: list[bytes], *, lose: bool = False, defer: bool = False) -> StreamRecord:
    protocol = StreamProtocol()
    protocol.connection_made(_Transport())  # type: ignore[arg-type]
    protocol.send(b"request", CHAT, URL, defer=defer)
    for piece in pieces:
        protocol.data_received(piece)
    if lose:
        protocol.connection_lost(None)
    async with asyncio.timeout(1):  # an answer whose end is missed would wait for ever
        return await protocol.finished()


def _pieces(data: bytes, cut: int) -> list[bytes]:
    return [data[i:i + cut] for i in range(0, len(data), cut)]


@pytest.mark.parametrize("defer", [False, True], ids=["live", "deferred"])
@pytest.mark.parametrize("cut", [1, 2, 3, 7, 64, 10_000])
def test_any_split_of_the_answer_reads_the_same(cut: int, defer: bool) -> None:
    record = asyncio.run(_read(_pieces(_answer(), cut), defer=defer))
    assert record.text == "abc" and record.sample.completion_tokens == 3 and record.sample.chunks == 3
    assert record.finish_reason is None and record.sample.cached_tokens == 0


async def _stamped(pieces: list[bytes], defer: bool) -> tuple[tuple[float, ...], bool]:
    """The chunk times of an answer read a piece at a time, a little apart; and whether the answer had ended before
    its last piece came (a live parse ends at the zero-size chunk's line, before the last CRLF)."""
    protocol = StreamProtocol()
    protocol.connection_made(_Transport())  # type: ignore[arg-type]
    protocol.send(b"request", CHAT, URL, defer=defer)
    early = False
    for piece in pieces:
        early = early or protocol.ended.done()
        protocol.data_received(piece)
        await asyncio.sleep(0.001)
    return (await protocol.finished()).chunk_times, early


@pytest.mark.parametrize("cut", [7, 40])
def test_a_deferred_answer_keeps_each_chunks_own_arrival_time(cut: int) -> None:
    pieces = _pieces(_answer(), cut)
    live, _ = asyncio.run(_stamped(pieces, defer=False))
    kept, kept_early = asyncio.run(_stamped(pieces, defer=True))
    assert not kept_early
    assert len(kept) == len(live) == 3 and kept[0] < kept[1] < kept[2]  # stamped as they came, not when parsed
    assert all(abs(a - b) < 0.05 for a, b in zip(kept, live, strict=True))


def test_a_deferred_empty_stream_ends_at_its_terminator() -> None:
    with pytest.raises(RequestFailed, match=r"ended without data: \[DONE\] after 0 content chunks"):
        asyncio.run(_read([HEAD, b"0\r\n", b"\r\n"], defer=True))


async def _lost_before_the_end(cut: int) -> tuple[bool, str]:
    protocol = StreamProtocol()
    protocol.connection_made(_Transport())  # type: ignore[arg-type]
    protocol.send(b"request", CHAT, URL, defer=True)
    protocol.data_received(_answer()[:cut])
    waiting = not protocol.ended.done()
    protocol.connection_lost(None)
    try:
        await protocol.finished()
    except RequestFailed as failed:
        return waiting, str(failed)
    return waiting, ""


def test_a_deferred_stream_cut_short_counts_what_came() -> None:
    waiting, reason = asyncio.run(_lost_before_the_end(len(HEAD) + 120))
    assert waiting and "broke after 1 content chunks" in reason


@pytest.mark.parametrize("defer", [False, True], ids=["live", "deferred"])
def test_an_error_status_says_sglangs_message(defer: bool) -> None:
    body = orjson.dumps({"object": "error", "message": "The model `x` does not exist."})
    answer = b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
        len(body), body)
    with pytest.raises(RequestFailed, match=r"HTTP 404 from POST .*: The model `x` does not exist\..*without /v1"):
        asyncio.run(_read(_pieces(answer, 5), defer=defer))


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


def test_an_empty_answer_ends_at_once_with_its_status_hint() -> None:
    answer = b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n"
    with pytest.raises(RequestFailed, match=r"HTTP 401 .*pass the same key as api_key"):
        asyncio.run(_read([answer]))


@pytest.mark.parametrize("defer", [False, True], ids=["live", "deferred"])
@pytest.mark.parametrize("bad", [b"zz\r\n", b"5\r\ndata: 1\r\n"])
def test_a_malformed_answer_fails_the_request_not_the_loop(bad: bytes, defer: bool) -> None:
    with pytest.raises(RequestFailed, match="unreadable answer from POST"):
        asyncio.run(_read([HEAD + bad + b"0\r\n\r\n"], defer=defer))


async def _closing_answer() -> tuple[bool, StreamRecord]:
    protocol = StreamProtocol()
    protocol.connection_made(_Transport())  # type: ignore[arg-type]
    protocol.send(b"request", CHAT, URL)
    protocol.data_received(_answer().replace(b"chunked\r\n", b"chunked\r\nConnection: close\r\n", 1))
    return protocol.open, await protocol.finished()


def test_connection_close_is_not_reused() -> None:
    still_open, record = asyncio.run(_closing_answer())
    assert record.text == "abc" and not still_open


def test_the_last_answers_late_crlf_does_not_spoil_the_next_head() -> None:
    record = asyncio.run(_read([b"\r\n" + _answer()]))
    assert record.text == "abc"


async def _round_trips(server_closes: bool) -> tuple[list[str], int]:
    """Two requests on one kept-alive connection to a local server; it answers `Connection: close` when told."""
    connections = 0

    handlers: list[asyncio.Task[object]] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        task = asyncio.current_task()
        assert task is not None
        handlers.append(task)
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                break
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            await reader.readexactly(length)
            answer = _answer()
            if server_closes:
                answer = answer.replace(b"chunked\r\n", b"chunked\r\nConnection: close\r\n", 1)
            writer.write(answer)
            await writer.drain()
            if server_closes:
                break
        writer.close()
        await writer.wait_closed()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    from pytest_sglang_perf.measurement.rounds import _connected  # the pool a round keeps

    endpoint, texts = Endpoint(f"http://127.0.0.1:{port}", None), []
    pool: list[StreamProtocol] = []
    for _ in range(2):
        await _connected(endpoint, pool, 1, 5.0)
        pool[0].send(endpoint.request(b"{}"), CHAT, endpoint.url, defer=True)
        texts.append((await pool[0].finished()).text)
    pool[0].close()
    for _ in range(100):  # the handler sees the close and closes its side
        await asyncio.sleep(0.01)
        if all(task.done() for task in handlers):
            break
    server.close()
    await server.wait_closed()
    return texts, connections


@pytest.mark.parametrize(("server_closes", "connections"), [(False, 1), (True, 2)])
def test_a_kept_alive_connection_is_reused_unless_the_server_closes_it(server_closes: bool, connections: int) -> None:
    texts, opened = asyncio.run(_round_trips(server_closes))
    assert texts == ["abc", "abc"] and opened == connections


def test_a_round_defers_only_within_its_memory_budget() -> None:
    from pytest_sglang_perf.measurement.rounds import BYTES_PER_TOKEN, DEFER_BUDGET, deferred

    request = ChatRequest(model="m", prompt="p", max_tokens=512, temperature=0.0, seed=0)
    fits = DEFER_BUDGET // (512 * BYTES_PER_TOKEN)
    assert deferred([request] * 256) and deferred([request] * fits)
    assert not deferred([request] * (fits + 1))
