"""The streaming client against a stub that emits SGLang's chat SSE stream on a known schedule."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import socket
import statistics
import threading
import warnings
from collections.abc import AsyncIterator, Iterator

import orjson
import psutil
import pytest
from sglang_stub import Script, StubServer, token_text

from pytest_sglang_perf.measurement.aiohttp_reader import _read_stream
from pytest_sglang_perf.measurement.client import (
    ChatRequest,
    RequestFailed,
    StreamAccumulator,
    StreamRecord,
)
from pytest_sglang_perf.measurement.rounds import run_requests

REQUEST = ChatRequest(model="stub-model", prompt="Write a red-black tree.", max_tokens=10, temperature=0.6, seed=7)


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer() as server:
        yield server


def _one(stub: StubServer, request: ChatRequest = REQUEST, api_key: str | None = None) -> StreamRecord:
    return run_requests(stub.url, request, count=1, warmup=0, api_key=api_key)[0]


def _failure(stub: StubServer, request: ChatRequest = REQUEST) -> RequestFailed:
    with pytest.raises(RequestFailed) as info:
        _one(stub, request)
    return info.value


def _client_connections(port: int) -> list[object]:
    conns = psutil.Process().net_connections(kind="tcp")
    return [c for c in conns if c.raddr and c.raddr.port == port and c.status == psutil.CONN_ESTABLISHED]


def test_request_body_and_headers_follow_sglang_field_names(stub: StubServer) -> None:
    _one(stub)
    got = stub.received[0]
    assert got.body == {
        "model": "stub-model", "messages": [{"role": "user", "content": "Write a red-black tree."}],
        "max_tokens": 10, "temperature": 0.6, "seed": 7, "stream": True,
        "stream_options": {"include_usage": True}, "ignore_eos": True, "return_spec_tokens_details": True,
        "return_cached_tokens_details": True,
    }
    assert got.headers["Content-Type"] == "application/json"
    assert "Authorization" not in got.headers


def test_spec_details_false_leaves_the_flag_out(stub: StubServer) -> None:
    stub.script.spec_verify_ct = 4
    record = _one(stub, ChatRequest("stub-model", "p", 10, 0.0, 1, spec_details=False))
    assert "return_spec_tokens_details" not in stub.received[0].body
    assert record.sample.spec_verify_ct is None
    assert "accept_length" not in record.sample.metrics()


def test_timings_match_the_server_schedule(stub: StubServer) -> None:
    """Compared with when the stub wrote each chunk (same clock, same process). Medians over the repeats
    keep one vCPU hiccup (1-5 ms on this kind of VM) from failing the test."""
    stub.script = Script(ttft=0.05, chunks=40, interval=0.01, tokens_per_chunk=2)
    records = run_requests(stub.url, dataclasses.replace(REQUEST, max_tokens=80), count=3, warmup=1)
    ttft_err, decode_err, throughput_err, chunk_delay = [], [], [], []
    for record, got in zip(records, stub.received[1:], strict=True):
        sample = record.sample
        ttft_err.append(abs(sample.ttft - (got.sent[0] - got.t_received)))
        decode_err.append(abs(sample.decode_time / (got.sent[-1] - got.sent[0]) - 1))
        true_throughput = 80 / (got.sent[-1] - got.t_received)
        throughput_err.append(abs(sample.metrics()["output_throughput"] / true_throughput - 1))
        delays = [t - (sent - got.t_received) for t, sent in zip(record.chunk_times, got.sent, strict=True)]
        chunk_delay.append(statistics.median(delays))
        assert sample.ttft == pytest.approx(0.05, abs=0.015)
        assert (sample.completion_tokens, sample.prompt_tokens, sample.chunks) == (80, 9, 40)
        assert record.chunk_times[0] == sample.ttft and record.chunk_times[-1] == sample.e2e
        assert record.text == "".join(token_text(i, 2) for i in range(40))
        assert record.finish_reason == "length"
    assert statistics.median(chunk_delay) < 0.002
    assert statistics.median(ttft_err) < 0.005
    assert statistics.median(decode_err) < 0.02
    assert statistics.median(throughput_err) < 0.02


def test_a_deferred_round_reads_what_a_live_one_reads(stub: StubServer) -> None:
    """Three streams at once, parsed after the round (the default) or as each read comes: the same records; the CPU
    split says how much came while the streams were open and after."""
    from pytest_sglang_perf.measurement.rounds import ReadCost, run_rounds

    stub.script = Script(ttft=0.02, chunks=20, interval=0.005, tokens_per_chunk=2)
    request = dataclasses.replace(REQUEST, max_tokens=40)
    kept, live = ReadCost(), ReadCost()
    [deferred] = run_rounds(stub.url, [request] * 3, count=1, warmup=0, cost=kept)
    [parsed] = run_rounds(stub.url, [request] * 3, count=1, warmup=0, reader="wire-live", cost=live)
    for one, other in zip(deferred, parsed, strict=True):
        assert (one.text, one.sample.chunks, one.finish_reason) == (other.text, other.sample.chunks, "length")
        assert len(one.chunk_times) == 20 and list(one.chunk_times) == sorted(one.chunk_times)
    assert kept.streaming > 0 and kept.parsing > 0 and kept.seconds >= 20 * 0.005
    assert live.streaming > 0 and live.seconds >= 20 * 0.005


def test_chunks_that_came_in_one_read_are_counted(stub: StubServer) -> None:
    """A server that writes three chunks at once (12 ms apart): two of each three share their read's stamp, and the
    client's load says so (ClientLoad.shared, the results file's `client.shared`)."""
    from pytest_sglang_perf.measurement.client_load import ClientLoad
    from pytest_sglang_perf.measurement.rounds import run_rounds

    stub.script = Script(ttft=0.01, chunks=12, interval=0.004, together=3)
    loads: list[ClientLoad] = []
    request = dataclasses.replace(REQUEST, max_tokens=12)
    [records] = run_rounds(stub.url, [request] * 2, count=1, warmup=1, loads=loads)
    [load] = loads
    assert load.chunks == 24 == sum(len(record.chunk_times) for record in records)
    assert 16 <= load.shared < 24, load  # more only if the client missed a whole 12 ms gap
    for record in records:
        times = record.chunk_times
        assert all(times[k] == times[k + 1] == times[k + 2] for k in range(0, 12, 3)), times  # each three: one read


def test_spec_fields_come_from_sglext(stub: StubServer) -> None:
    stub.script = Script(chunks=5, tokens_per_chunk=2, spec_verify_ct=4)
    sample = _one(stub).sample
    assert (sample.spec_verify_ct, sample.spec_accept_length) == (4, 2.5)
    assert sample.metrics()["accept_length"] == 2.5


def test_reasoning_content_chunks_count_as_tokens(stub: StubServer) -> None:
    stub.script = Script(chunks=10, reasoning=True)
    record = _one(stub)
    assert record.sample.chunks == 10
    assert record.text == "".join(token_text(i, 1) for i in range(10))


def test_api_key_is_sent_as_bearer_token(stub: StubServer) -> None:
    stub.script.api_key = "sekrit"
    record = _one(stub, api_key="sekrit")
    assert stub.received[0].headers["Authorization"] == "Bearer sekrit"
    assert record.sample.completion_tokens == 10


def test_missing_api_key_fails_with_the_fix(stub: StubServer) -> None:
    stub.script.api_key = "sekrit"
    failure = _failure(stub)
    assert failure.status == 401
    assert failure.reason == (f"HTTP 401 from POST {stub.url}/v1/chat/completions: Unauthorized "
                              "(the server was started with --api-key: pass the same key as api_key)")


def test_http_error_carries_status_and_sglang_message(stub: StubServer) -> None:
    body = orjson.dumps({"object": "error", "message": "Requested token count exceeds the model's maximum "
                         "context length of 4096 tokens.", "type": "BadRequestError", "param": None, "code": 400})
    stub.script = Script(status=400, error_body=body)
    failure = _failure(stub)
    assert (failure.status, failure.body) == (400, body.decode())
    assert failure.reason == (f"HTTP 400 from POST {stub.url}/v1/chat/completions: Requested token count "
                              "exceeds the model's maximum context length of 4096 tokens.")


def test_a_json_answer_instead_of_a_stream_fails(stub: StubServer) -> None:
    stub.script.json_answer = b'{"id":"x","object":"chat.completion","choices":[]}'
    failure = _failure(stub)
    assert failure.reason == (f"expected a text/event-stream answer from POST {stub.url}/v1/chat/completions, got "
                              'application/json: {"id":"x","object":"chat.completion","choices":[]} '
                              "(does the server support stream=true?)")


def test_connection_refused_names_the_url() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(RequestFailed) as info:
        run_requests(f"http://127.0.0.1:{port}", REQUEST, count=1, warmup=0)
    assert info.value.reason.startswith(f"cannot connect to http://127.0.0.1:{port}/v1/chat/completions: ")
    assert "is the server running? it may have died" in info.value.reason
    assert info.value.status is None


def test_connection_reset_mid_stream(stub: StubServer) -> None:
    stub.script.reset_after = 3
    failure = _failure(stub)
    assert failure.reason.startswith(f"connection to {stub.url}/v1/chat/completions broke after 3 content chunks: ")
    assert failure.reason.endswith("(the server died or dropped the stream: check its log)")


def test_timeout(stub: StubServer) -> None:
    stub.script.hang = 1.0
    request = ChatRequest("stub-model", "p", 10, 0.0, 1, timeout=0.2)
    failure = _failure(stub, request)
    assert failure.reason == (f"timed out after 0.2 s (ChatRequest.timeout) on POST {stub.url}/v1/chat/completions "
                              "after 0 content chunks: the server is hung or far slower than expected")


def test_stream_without_done(stub: StubServer) -> None:
    stub.script.truncate_after = 4
    assert _failure(stub).reason == ("stream ended without data: [DONE] after 4 content chunks: the response was "
                                     "truncated (did the server die or restart? check its log)")


def test_error_event_in_stream(stub: StubServer) -> None:
    stub.script.error_after = 2
    failure = _failure(stub)
    assert failure.reason == "server reported an error mid-stream: Generation aborted: out of memory."
    assert orjson.loads(failure.body)["error"]["code"] == 500


def test_no_usage_chunk(stub: StubServer) -> None:
    stub.script.send_usage = False
    assert _failure(stub).reason.startswith("server sent no usage: the stream had no chunk with `usage`")


def test_short_completion(stub: StubServer) -> None:
    stub.script = Script(chunks=5, reported_tokens=300, finish_reason="stop")
    request = ChatRequest("stub-model", "p", 512, 0.0, 1)
    assert _failure(stub, request).reason.startswith("short: asked 512, got 300 (finish_reason=stop)")


def test_long_completion_with_ignore_eos_fails_too(stub: StubServer) -> None:
    stub.script.reported_tokens = 11
    assert _failure(stub).reason.startswith("long: asked 10, got 11 (finish_reason=length)")


def test_short_completion_is_fine_without_ignore_eos(stub: StubServer) -> None:
    stub.script = Script(chunks=3, finish_reason="stop")
    sample = _one(stub, ChatRequest("stub-model", "p", 10, 0.0, 1, ignore_eos=False)).sample
    assert sample.completion_tokens == 3


def test_zero_content_chunks(stub: StubServer) -> None:
    stub.script.send_content = False
    assert _failure(stub).reason == ("server sent no content: usage says 10 completion tokens but no chunk "
                                     "carried delta.content or delta.reasoning_content")


def test_warmup_is_discarded_and_the_connection_kept_alive(stub: StubServer) -> None:
    records = run_requests(stub.url, REQUEST, count=3, warmup=2)
    assert len(records) == 3 and len(stub.received) == 5
    assert len({got.peer for got in stub.received}) == 1


def test_bad_counts_are_rejected() -> None:
    with pytest.raises(ValueError, match="count >= 1 and warmup >= 0, got count=0 warmup=0"):
        run_requests("http://127.0.0.1:1", REQUEST, count=0, warmup=0)


def test_leaves_no_loop_thread_session_or_connection_behind(stub: StubServer) -> None:
    port = int(stub.url.rsplit(":", 1)[1])
    threads = threading.active_count()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_requests(stub.url, REQUEST, count=2, warmup=1)
        gc.collect()
    assert [str(w.message) for w in caught] == []
    assert threading.active_count() == threads
    assert _client_connections(port) == []
    assert type(asyncio.get_event_loop_policy()).__module__.startswith("asyncio")


def test_works_from_a_bare_thread_and_from_inside_a_running_loop(stub: StubServer) -> None:
    results: list[StreamRecord] = []
    worker = threading.Thread(target=lambda: results.extend(run_requests(stub.url, REQUEST, count=1, warmup=0)))
    worker.start()
    worker.join(timeout=30)

    async def inside_loop() -> list[StreamRecord]:
        return run_requests(stub.url, REQUEST, count=1, warmup=0)

    results.extend(asyncio.run(inside_loop()))
    assert [r.sample.completion_tokens for r in results] == [10, 10]


class _Content:
    def __init__(self, pieces: list[bytes]) -> None:
        self._pieces = pieces

    async def iter_any(self) -> AsyncIterator[bytes]:
        for piece in self._pieces:
            yield piece


class _Response:
    def __init__(self, pieces: list[bytes]) -> None:
        self.content = _Content(pieces)


def _sglang_stream() -> bytes:
    role = {"reasoning_content": None, "role": "assistant", "content": ""}
    events: list[dict[str, object]] = [{"choices": [{"index": 0, "delta": role}]}]
    events += [{"choices": [{"index": 0, "delta": {"reasoning_content": None, "content": f"w{i} "}}]}
               for i in range(5)]
    events += [{"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 5}}]
    data = b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in events)
    ids = b'event: sglext_ids\ndata: {"choices":[],"sglext":{"spec_tokens_details":{"spec_verify_ct":2}}}\n\n'
    return data + ids + b"data: [DONE]\n\n"


@pytest.mark.parametrize("size", [1, 7, 64, 100000])
def test_events_split_across_reads_parse_the_same(size: int) -> None:
    data = _sglang_stream()
    acc = StreamAccumulator()
    asyncio.run(_read_stream(_Response([data[i:i + size] for i in range(0, len(data), size)]),  # type: ignore[arg-type]
                             acc, 0.0))
    record = acc.record(ChatRequest("m", "p", 5, 0.0, 0))
    assert record.text == "w0 w1 w2 w3 w4 "
    assert (record.sample.chunks, record.sample.prompt_tokens, record.sample.spec_verify_ct) == (5, 3, 2)


def test_non_json_event_fails_clearly() -> None:
    with pytest.raises(RequestFailed, match="server sent an event that is not JSON: <html>oops</html>"):
        StreamAccumulator().feed_event(b"data: <html>oops</html>", 0.0)


def test_feed_events_takes_every_event_as_feed_event_does() -> None:
    """The per-read fast path (feed_events) and the event-by-event path agree on every kind of event."""
    def chunk(delta: str, finish: str = "null") -> bytes:
        return (b'data: {"choices":[{"index":0,"delta":%s,"finish_reason":%s}],"usage":null}'
                % (delta.encode(), finish.encode()))

    events = [chunk('{"role":"assistant","content":""}'), chunk('{"content":"a"}'),
              chunk('{"reasoning_content":"think","content":null}'), chunk('{"reasoning_content":"r","content":"b"}'),
              chunk("null"), b": a comment\ndata: {\"choices\":[{\"delta\":{\"content\":\"c\"}}]}",
              chunk('{"content":null}', '"length"'),
              b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}',
              b'data: {"choices":[],"sglext":{"spec_tokens_details":{"spec_verify_ct":2,"spec_accept_length":2.0}}}',
              b"data: [DONE]", chunk('{"content":"after done"}')]
    one_by_one, batched = StreamAccumulator(), StreamAccumulator()
    for event in events:
        one_by_one.feed_event(event, 0.5)
    batched.feed_events(events, 0.5)
    assert [getattr(batched, name) for name in StreamAccumulator.__slots__] == \
        [getattr(one_by_one, name) for name in StreamAccumulator.__slots__]
    assert batched.parts == ["a", "think", "rb", "c"] and batched.done and batched.finish_reason == "length"
    with pytest.raises(RequestFailed, match="not JSON"):
        StreamAccumulator().feed_events([b"data: {oops"], 0.1)
    with pytest.raises(RequestFailed, match="error mid-stream"):
        StreamAccumulator().feed_events([b'data: {"error":{"message":"boom"}}'], 0.1)
