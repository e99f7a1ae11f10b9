"""How much our streaming client distorts what it measures, side by side with the `openai` package.

    python benchmarks/bench_client.py            (about 30 s, loopback only)

A server subprocess (pinned to one core, the client to another) streams SGLang 0.5.23's chat chunks on a
precise schedule, one token per chunk, and writes into each chunk's content the `perf_counter()` at which it
sent it (the first chunk also carries the time the request was received; CLOCK_MONOTONIC is shared by both
processes). Compared with those stamps:
  TTFT overhead    measured TTFT - (first chunk sent - request received): request + delivery cost, ms
  throughput error measured decode throughput / the server's actual one - 1
and, with the server writing as fast as it can, how many chunks per second each client ingests.
"""

from __future__ import annotations

import argparse
import socket
import socketserver
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from time import perf_counter

import orjson
from served import pin, script, served

from pytest_sglang_perf.measurement.client import ChatRequest, StreamRecord
from pytest_sglang_perf.measurement.openai_client import make_openai_client, stream_with_openai
from pytest_sglang_perf.measurement.rounds import run_requests

RATES = (1_000, 10_000, 20_000)
DECODE_SECONDS = 0.5
SERVER_TTFT = 0.02
REPEATS = 5
FLOOD_CHUNKS = {"ours": 300_000, "openai": 20_000}
_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
         b"Transfer-Encoding: chunked\r\n\r\n")


# ---------------------------------------------------------------- server (subprocess)

def _frame(event: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(event), event)


def _chunk(model: bytes, delta: bytes, finish: bytes = b"null") -> bytes:
    return _frame(b'data: {"id":"bench","object":"chat.completion.chunk","created":1764410000,"model":' + model
                  + b',"choices":[{"index":0,"delta":' + delta + b',"logprobs":null,"finish_reason":' + finish
                  + b',"matched_stop":null}]}\n\n')


def _content(model: bytes, text: str) -> bytes:
    return _chunk(model, b'{"reasoning_content":null,"content":' + orjson.dumps(text) + b"}")


def _tail(model: bytes, tokens: int) -> bytes:
    usage = orjson.dumps({"prompt_tokens": 5, "total_tokens": 5 + tokens, "completion_tokens": tokens,
                          "prompt_tokens_details": None, "reasoning_tokens": 0, "completion_tokens_details": None})
    usage_chunk = (b'data: {"id":"bench","object":"chat.completion.chunk","created":1764410000,"model":' + model
                   + b',"choices":[],"usage":' + usage + b"}\n\n")
    return (_chunk(model, b'{"reasoning_content":null}', b'"length"') + _frame(usage_chunk)
            + _frame(b"data: [DONE]\n\n") + b"0\r\n\r\n")


def _wait_until(deadline: float) -> None:
    while (now := perf_counter()) < deadline:
        if deadline - now > 0.002:
            time.sleep(deadline - now - 0.001)


def _paced(conn: socket.socket, model: bytes, tokens: int, rate: float, t_received: float) -> None:
    start = t_received + SERVER_TTFT
    for k in range(tokens):
        _wait_until(start + k / rate)
        stamp = perf_counter()
        if k == 0:
            role = _chunk(model, b'{"reasoning_content":null,"role":"assistant","content":""}')
            conn.sendall(role + _content(model, f"{t_received:.9f} {stamp:.9f} "))
        else:
            conn.sendall(_content(model, f"{stamp:.9f} "))


def _flood(conn: socket.socket, model: bytes, tokens: int) -> None:
    conn.sendall(_chunk(model, b'{"reasoning_content":null,"role":"assistant","content":""}'))
    piece = _content(model, "x") * 1000
    for _ in range(tokens // 1000):
        conn.sendall(piece)
    conn.sendall(_content(model, "x") * (tokens % 1000))


def _read_request(reader: socketserver.StreamRequestHandler) -> tuple[bytes, bytes] | None:
    head = b""
    while (line := reader.rfile.readline()) not in (b"\r\n", b"\n"):
        if not line:
            return None
        head += line
    length = next((int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")), 0)
    return head, reader.rfile.read(length)


class _Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while (request := _read_request(self)) is not None:
            t_received = perf_counter()
            body = orjson.loads(request[1])
            model = orjson.dumps(body["model"])
            rate, tokens = float(body["model"].split(":")[1]), int(body["max_tokens"])
            self.connection.sendall(_HEAD)
            if rate > 0:
                _paced(self.connection, model, tokens, rate, t_received)
            else:
                _flood(self.connection, model, tokens)
            self.connection.sendall(_tail(model, tokens))


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def serve() -> None:
    pin(0)
    with _Server(("127.0.0.1", 0), _Handler) as server:
        print(server.server_address[1], flush=True)
        server.serve_forever()


# ---------------------------------------------------------------- client side

def _request(rate: float, tokens: int) -> ChatRequest:
    return ChatRequest(model=f"rate:{rate:g}", prompt="bench", max_tokens=tokens, temperature=0.0, seed=0,
                       spec_details=False, timeout=60.0)


@dataclass(frozen=True)
class Distortion:
    ttft_overhead_ms: float
    throughput_error: float


def distortion(record: StreamRecord) -> Distortion:
    stamps = [float(s) for s in record.text.split()]
    t_received, sent = stamps[0], stamps[1:]
    true_ttft = sent[0] - t_received
    measured = (len(sent) - 1) / record.sample.decode_time
    actual = (len(sent) - 1) / (sent[-1] - sent[0])
    return Distortion((record.sample.ttft - true_ttft) * 1e3, measured / actual - 1)


def _ours(url: str, request: ChatRequest, repeats: int) -> list[StreamRecord]:
    return run_requests(url, request, count=repeats, warmup=1)


def _openai(url: str, request: ChatRequest, repeats: int) -> list[StreamRecord]:
    with make_openai_client(url, timeout=60.0) as client:
        stream_with_openai(client, request)
        return [stream_with_openai(client, request) for _ in range(repeats)]


Runner = Callable[[str, ChatRequest, int], list[StreamRecord]]
CLIENTS: dict[str, Runner] = {"ours": _ours, "openai": _openai}


def _median_distortion(records: list[StreamRecord]) -> Distortion:
    found = [distortion(r) for r in records]
    return Distortion(statistics.median(d.ttft_overhead_ms for d in found),
                      statistics.median(d.throughput_error for d in found))


def _ingest(url: str, name: str) -> tuple[float, float]:
    """(chunks per second, client CPU µs per chunk) with the server writing as fast as it can.

    Each runner sends a warmup and then the measured request, so the CPU time covers 2 x tokens chunks."""
    tokens = FLOOD_CHUNKS[name]
    cpu = time.process_time()
    record = CLIENTS[name](url, _request(0, tokens), 1)[0]
    cpu = time.process_time() - cpu
    return (tokens - 1) / record.sample.decode_time, cpu / (2 * tokens) * 1e6


def _print_distortion(url: str) -> None:
    print(f"{'tok/s':>7} | {'TTFT overhead ms':^27} | {'throughput error':^27}")
    print(f"{'':>7} | {'ours':>7} {'openai':>8} {'ratio':>8} | {'ours':>8} {'openai':>8} {'ratio':>8}")
    for rate in RATES:
        request = _request(rate, int(rate * DECODE_SECONDS))
        ours, theirs = (_median_distortion(CLIENTS[name](url, request, REPEATS)) for name in ("ours", "openai"))
        ttft_ratio = theirs.ttft_overhead_ms / ours.ttft_overhead_ms
        err_ratio = abs(theirs.throughput_error) / max(abs(ours.throughput_error), 1e-9)
        print(f"{rate:>7} | {ours.ttft_overhead_ms:>7.3f} {theirs.ttft_overhead_ms:>8.3f} {ttft_ratio:>7.1f}x | "
              f"{ours.throughput_error:>+8.3%} {theirs.throughput_error:>+8.3%} {err_ratio:>7.0f}x")


def _print_ingest(url: str) -> None:
    print(f"\n{'ingest at max speed':<20} | {'chunks/s':>10} | {'CPU µs/chunk':>12}")
    results = {name: _ingest(url, name) for name in CLIENTS}
    for name, (rate, cpu) in results.items():
        print(f"{name:<20} | {rate:>10,.0f} | {cpu:>12.2f}")
    print(f"{'ratio ours/openai':<20} | {results['ours'][0] / results['openai'][0]:>9.1f}x |")


def main(_: argparse.Namespace) -> None:
    started = perf_counter()
    with served(__file__) as (pid, url):
        pin(1)
        print(f"server {url} (pid {pid}); {REPEATS} repeats after 1 warmup, medians; "
              f"{DECODE_SECONDS:g} s of decode at each rate, server TTFT {SERVER_TTFT * 1e3:g} ms\n")
        _print_distortion(url)
        _print_ingest(url)
    print(f"\n(done in {perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    script(__doc__, serve, main, "run the stamping SSE server (internal)")
