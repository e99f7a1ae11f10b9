"""The measuring client under load, side by side: ours (and the same rounds on the event loop's stamps instead of
the kernel's, parsing each read as it comes, and through aiohttp), SGLang's own `bench_serving` client and the
`openai` package.

    tox -e sglang-cpu -- python benchmarks/bench_load.py        (7-8 minutes; bench_serving needs SGLang installed)
    python benchmarks/bench_load.py                              (without bench_serving, in the dev environment)
    python benchmarks/bench_load.py --rows 256x250 --clients ours,bare --passes 3    (one row again, ~1 minute)

A pacing server (a subprocess pinned to one core; the clients run pinned to the other) streams SGLang 0.5.23's chat
chunks to N streams at once in SGLang-like bursts: at each step of a common clock every running stream gets its next
token, one chunk each. Each chunk's content is the `perf_counter()` at which the server wrote it (the first also
carries when the request arrived: the kernel's receive stamp of its first bytes, so neither the server's wake-up
nor its parsing nor its queue of requests sent at once counts against a client; CLOCK_MONOTONIC is shared by both
processes), so every client is compared with the true schedule:

  tput err    median over streams of (client decode rate / the server's actual decode rate - 1)
  TTFT +ms    median over streams of client TTFT - (first chunk written - request arrived): the request's cost
  p99 delay   p99 over every chunk of (client's stamp - the server's stamp), ms: how late chunks were stamped
  CPU us/tok  the client process's CPU time per token received (the server runs in another process)
  core        the client's CPU time / wall time over the round (1.0 = one core busy)

and, with the server writing as fast as it can to N streams, how many tokens per second each client ingests. The
last two columns are no client: a bare Python epoll loop that only reads and stamps (it finds the chunks after the
round), with the kernel's receive stamps as the plugin takes them and with its own `perf_counter()`. They are what
this machine and Python's system calls cost any reader, so they tell a client's share of a figure from the
machine's (uvloop's C read path can cost less than them).
"ours" stamps each read with the kernel's receive time (measurement/stamped_transport.py); "ours, loop stamps" is
the same reader stamping as the event loop hands a read over, as over TLS: side by side, what the kernel's stamps
cost and what they save. For the plugin's readers (and the bare loops) a second table splits the CPU: while the
streams are open (reading and stamping) and after the round (parsing the answers kept; wire.py's deferred reads),
against the same reader parsing each read as it comes, and gives the CPU while streaming against the bare loop's in
the same row (`x bare`: the machine's noise moves both); the first lines give the reader's own cost per read,
without a socket.
Targets (issue 14): error <= 0.5%, p99 delay <= 1 ms and TTFT overhead <= 0.3 ms at 64-256 streams, >= 64,000 tok/s
per core at <= 50% of it; equal to or better than bench_serving on every row.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import itertools
import re
import select
import socket
import statistics
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, replace
from time import perf_counter
from typing import Any

import orjson
from served import pin, script, served

from pytest_sglang_perf.measurement import kernel_stamps
from pytest_sglang_perf.measurement.client import ChatRequest
from pytest_sglang_perf.measurement.rounds import ReadCost, Reader, run_rounds
from pytest_sglang_perf.measurement.stamped_transport import StampedTransport

ROWS = ((1, 100), (1, 1_000), (1, 20_000), (16, 1_000), (64, 1_000), (64, 250), (128, 500), (256, 250))
"""(streams, tok/s per stream): up to 64,000 tok/s in all, what the targets ask of one core."""
DECODE_SECONDS = 1.0
MAX_TOKENS = 2_000
ROUNDS = 2
SERVER_TTFT = 0.02
FLOOD = ((1, 200_000), (64, 3_000))
"""(streams, tokens each) written as fast as the server can."""
_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
         b"Transfer-Encoding: chunked\r\n\r\n")


# ---------------------------------------------------------------- the pacing server (subprocess)

def _frame(event: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(event), event)


def _chunk(delta: bytes, finish: bytes = b"null") -> bytes:
    return _frame(b'data: {"id":"bench","object":"chat.completion.chunk","created":1764410000,"model":"bench",'
                  b'"choices":[{"index":0,"delta":' + delta + b',"logprobs":null,"finish_reason":' + finish
                  + b',"matched_stop":null}]}\n\n')


def _content(text: str) -> bytes:
    return _chunk(b'{"reasoning_content":null,"content":' + orjson.dumps(text) + b"}")


def _tail(tokens: int) -> bytes:
    usage = orjson.dumps({"prompt_tokens": 5, "total_tokens": 5 + tokens, "completion_tokens": tokens,
                          "prompt_tokens_details": None, "reasoning_tokens": 0, "completion_tokens_details": None})
    usage_chunk = (b'data: {"id":"bench","object":"chat.completion.chunk","created":1764410000,"model":"bench",'
                   b'"choices":[],"usage":' + usage + b"}\n\n")
    return _chunk(b'{"reasoning_content":null}', b'"length"') + _frame(usage_chunk) + _frame(b"data: [DONE]\n\n") + (
        b"0\r\n\r\n")


@dataclass
class _Stream:
    writer: StampedTransport
    tokens: int
    period: float
    """Seconds between tokens; 0: as fast as possible."""
    received: float
    start: float
    sent: int = 0


class _Pacer:
    """One clock for every stream: at each step, every running stream of a rate gets its next chunk."""

    def __init__(self) -> None:
        self.streams: list[_Stream] = []
        self.wake = asyncio.Event()

    async def run(self) -> None:
        while True:
            if not self.streams:
                self.wake.clear()
                await self.wake.wait()
            now = perf_counter()
            for stream in list(self.streams):
                self._serve(stream, now)
            due = [s.start + s.sent * s.period for s in self.streams if s.period > 0]
            await asyncio.sleep(max(0.0, min(due) - perf_counter()) if due else 0)

    def _serve(self, stream: _Stream, now: float) -> None:
        while stream.sent < stream.tokens and (stream.period == 0 or stream.start + stream.sent * stream.period <= now):
            stamp = perf_counter()
            if stream.sent == 0:
                role = _chunk(b'{"reasoning_content":null,"role":"assistant","content":""}')
                stream.writer.write(role + _content(f"{stream.received:.9f} {stamp:.9f} "))
            else:
                stream.writer.write(_content(f"{stamp:.9f} "))
            stream.sent += 1
            if stream.period == 0 and stream.sent % 64 == 0:
                break  # as fast as possible, yet fair between streams
        if stream.sent >= stream.tokens:
            stream.writer.write(_tail(stream.tokens))
            self.streams.remove(stream)


class _Connection:
    """One client connection: each request is stamped with when its first bytes reached this host (the kernel's
    receive stamp; stamped_transport.py reads the socket, as the plugin's client does), so the server's own wake-up
    and parsing, and its turn among many requests that arrive at once, count as the server's time, not the client's;
    then it is streamed by the pacer. The connection stays open for the next request."""

    def __init__(self, pacer: _Pacer) -> None:
        self.pacer = pacer
        self.transport: StampedTransport | None = None
        self.pending = b""
        self.arrived = 0.0
        self.parsing = False

    def connection_made(self, transport: StampedTransport) -> None:
        self.transport = transport

    def received(self, data: bytes, at: float, kernel: bool) -> None:
        """Only stamp and keep: the request is parsed by a callback that runs after every read of this turn of the
        loop. `at` is the kernel's stamp (or, without one, this read's time: then the server's wake-up counts as
        the client's)."""
        if not self.pending:
            self.arrived = at
        if not self.parsing:
            self.parsing = True
            asyncio.get_running_loop().call_soon(self._parse)
        self.pending += data

    def eof_received(self) -> bool | None:
        return None

    def _parse(self) -> None:
        self.parsing = False
        head_end = self.pending.find(b"\r\n\r\n")
        if head_end < 0:
            return  # cut by the read: the next read brings the rest
        length = next(int(line.split(b":")[1]) for line in self.pending[:head_end].split(b"\r\n")
                      if line.lower().startswith(b"content-length"))
        if len(self.pending) < head_end + 4 + length:
            return
        body = orjson.loads(self.pending[head_end + 4:head_end + 4 + length])
        self.pending = self.pending[head_end + 4 + length:]
        self._start(float(body["model"].split(":")[1]), int(body.get("max_tokens") or body["max_completion_tokens"]))

    def _start(self, rate: float, tokens: int) -> None:
        assert self.transport is not None
        self.transport.write(_HEAD)
        period = 1.0 / rate if rate > 0 else 0.0
        start = self.arrived + SERVER_TTFT
        if period:  # on the common clock: streams of one rate step together, as in a batch
            start = (int(start / period) + 1) * period
        self.pacer.streams.append(_Stream(self.transport, tokens, period, self.arrived, start))
        self.pacer.wake.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.pacer.streams = [stream for stream in self.pacer.streams if stream.writer is not self.transport]


async def _serve_forever() -> None:
    pacer = _Pacer()
    kernel_stamps.keep_on()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)
    listener.setblocking(False)
    print(listener.getsockname()[1], flush=True)
    await asyncio.gather(_accept(listener, pacer), pacer.run())


async def _accept(listener: socket.socket, pacer: _Pacer) -> None:
    """Each connection on a StampedTransport, with no delay for small writes (as uvloop's transports have)."""
    loop = asyncio.get_running_loop()
    while True:
        sock, _ = await loop.sock_accept(listener)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        kernel_stamps.enable(sock)
        StampedTransport(loop, sock, _Connection(pacer))


def serve() -> None:
    pin(0)
    _run(_serve_forever)


# ---------------------------------------------------------------- the clients

@dataclass(frozen=True)
class Stream:
    """One stream as a client saw it: its send time, the content chunks' receive times (absolute perf_counter) and
    their text (the server's stamps)."""

    sent: float
    times: tuple[float, ...]
    text: str


def _run(make: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    try:
        import uvloop
        return uvloop.run(make())
    except ImportError:
        return asyncio.run(make())


def _request(rate: float, tokens: int) -> ChatRequest:
    return ChatRequest(model=f"rate:{rate:g}", prompt="bench", max_tokens=tokens, temperature=0.0, seed=0,
                       spec_details=False, cache_details=False, timeout=300.0)


class Ours:
    """The plugin's concurrent rounds, as a measurement sends them (measurement/rounds.py), with one reader; `cost`
    holds the last call's CPU split (ReadCost)."""

    def __init__(self, reader: Reader) -> None:
        self.reader: Reader = reader
        self.cost = ReadCost()

    @property
    def splits(self) -> bool:
        """Whether `cost` is filled in (the bare-connection reader, deferred or parsing live)."""
        return self.reader != "aiohttp"

    def __call__(self, url: str, streams: int, rate: float, tokens: int, rounds: int) -> list[list[Stream]]:
        self.cost = ReadCost()
        found = run_rounds(url, [_request(rate, tokens)] * streams, count=rounds, warmup=0, reader=self.reader,
                           cost=self.cost)
        return [[Stream(r.sent_at, tuple(r.sent_at + t for t in r.chunk_times), r.text) for r in one]
                for one in found]


def openai_package(url: str, streams: int, rate: float, tokens: int, rounds: int) -> list[list[Stream]]:
    import openai

    async def one(client: openai.AsyncOpenAI) -> Stream:
        times: list[float] = []
        parts: list[str] = []
        sent = perf_counter()
        reply = await client.chat.completions.create(
            model=f"rate:{rate:g}", messages=[{"role": "user", "content": "bench"}], max_tokens=tokens,
            temperature=0.0, stream=True, extra_body={"ignore_eos": True})
        async for chunk in reply:
            now = perf_counter()
            if chunk.choices and chunk.choices[0].delta.content:
                times.append(now)
                parts.append(chunk.choices[0].delta.content)
        return Stream(sent, tuple(times), "".join(parts))

    async def all_rounds() -> list[list[Stream]]:
        async with openai.AsyncOpenAI(base_url=url + "/v1", api_key="bench", max_retries=0) as client:
            return [list(await asyncio.gather(*(one(client) for _ in range(streams)))) for _ in range(rounds)]

    found: list[list[Stream]] = _run(all_rounds)
    return found


def bench_serving(url: str, streams: int, rate: float, tokens: int, rounds: int) -> list[list[Stream]]:
    """SGLang's client as `bench_serving --max-concurrency N` runs it (a session and connection per request)."""
    from sglang.benchmark import serving

    async def one_round() -> list[Stream]:
        inputs = [serving.RequestFuncInput(prompt="bench", api_url=url + "/v1/chat/completions", prompt_len=1,
                                           output_len=tokens, model=f"rate:{rate:g}", lora_name="", image_data=None,
                                           extra_request_body={}) for _ in range(streams)]
        outputs = await asyncio.gather(*(serving.async_request_openai_chat_completions(i) for i in inputs))
        found = []
        for out in outputs:
            if not out.success:
                raise RuntimeError(f"bench_serving request failed: {out.error}")
            first = out.start_time + out.ttft
            times = [first]
            for gap in out.itl:
                times.append(times[-1] + gap)
            found.append(Stream(out.start_time, tuple(times), out.generated_text))
        return found

    async def all_rounds() -> list[list[Stream]]:
        return [await one_round() for _ in range(rounds)]

    result: list[list[Stream]] = _run(all_rounds)
    return result


def _bench_serving_ready() -> str | None:
    """None when SGLang's bench_serving client can run here, else why not."""
    try:
        from sglang.benchmark import serving
    except ImportError as exc:
        return f"not installed here ({exc}); run this benchmark with `tox -e sglang-cpu -- python {__file__}`"
    serving.set_global_args(argparse.Namespace(disable_stream=False, disable_ignore_eos=False, print_requests=False,
                                               return_logprob=False, header=None))
    return None


Client = Callable[[str, int, float, int, int], list[list[Stream]]]
"""(url, streams, tok/s per stream, tokens, rounds) -> each round's streams."""


# ---------------------------------------------------------------- what each round says about a client

@dataclass(frozen=True)
class Row:
    error: float
    ttft_overhead_ms: float
    p99_delay_ms: float
    cpu_us_per_token: float
    core: float
    split: tuple[float, float, float] | None = None
    """The plugin's reader: (CPU us per token while the streams were open, core share then, CPU us per token
    after the rounds)."""


def _stamps(stream: Stream) -> tuple[float, list[float]]:
    values = [float(s) for s in stream.text.split()]
    return values[0], values[1:]


def judge(found: list[Stream], cpu: float, wall: float, tokens_all: int) -> Row:
    errors, overheads, delays = [], [], []
    tokens = 0
    for stream in found:
        received, stamps = _stamps(stream)
        if len(stream.times) != len(stamps):
            raise RuntimeError(f"a client saw {len(stream.times)} content chunks for {len(stamps)} tokens")
        tokens += len(stamps)
        overheads.append((stream.times[0] - stream.sent) - (stamps[0] - received))
        delays += [t - s for t, s in zip(stream.times, stamps, strict=True)]
        if len(stamps) > 1:
            measured = (len(stamps) - 1) / (stream.times[-1] - stream.times[0])
            actual = (len(stamps) - 1) / (stamps[-1] - stamps[0])
            errors.append(measured / actual - 1)
    delays.sort()
    return Row(statistics.median(errors) if errors else 0.0, statistics.median(overheads) * 1e3,
               delays[min(len(delays) - 1, int(0.99 * len(delays)))] * 1e3, cpu / tokens_all * 1e6, cpu / wall)


def measure(client: Client, url: str, streams: int, rate: float, tokens: int) -> Row:
    """A warmup round (connections, imports, caches) and ROUNDS measured ones in one call, as a measurement runs;
    the CPU figures cover the whole call, every round's tokens."""
    cpu, wall = time.process_time(), perf_counter()
    found = client(url, streams, rate, tokens, ROUNDS + 1)
    cpu, wall = time.process_time() - cpu, perf_counter() - wall
    measured = [stream for one in found[1:] for stream in one]
    tokens_all = sum(len(s.times) for one in found for s in one)
    row = judge(measured, cpu, wall, tokens_all)
    if isinstance(client, Ours | BareLoop) and client.splits:
        cost = client.cost
        row = replace(row, split=(cost.streaming / tokens_all * 1e6, cost.streaming / cost.seconds,
                                  cost.parsing / tokens_all * 1e6))
    return row


def ingest(client: Client, url: str, streams: int, tokens: int) -> tuple[float, float, float | None]:
    """(tokens per second taken in, parsing included; client core share; for the plugin's reader, tokens per
    second received while the streams were open) with the server writing as fast as it can."""
    cpu, wall = time.process_time(), perf_counter()
    found = client(url, streams, 0, tokens, 1)
    wall, cpu = perf_counter() - wall, time.process_time() - cpu
    total = sum(len(s.times) for s in found[0])
    received = total / client.cost.seconds if isinstance(client, Ours | BareLoop) and client.splits else None
    return total / wall, cpu / wall, received


# ---------------------------------------------------------------- the run

def _cell(row: Row | str) -> str:
    if isinstance(row, str):
        return f"{row[:46]:>46}"
    return (f"{row.error:>+8.2%} {row.ttft_overhead_ms:>7.2f} {row.p99_delay_ms:>7.2f} {row.cpu_us_per_token:>7.1f} "
            f"{row.core:>6.0%}")


def _print_rows(url: str, clients: dict[str, Client | str], rows: Sequence[tuple[int, int]]) -> None:
    head = f"{'streams':>7} {'tok/s':>6} |"
    sub = f"{'':>7} {'':>6} |"
    for name in clients:
        head += f" {name:^46} |"
        sub += f" {'tput err':>8} {'TTFT+ms':>7} {'p99 ms':>7} {'us/tok':>7} {'core':>6} |"
    print(head)
    print(sub)
    splits: list[str] = []
    for streams, rate in rows:
        tokens = min(MAX_TOKENS, int(rate * DECODE_SECONDS))
        line = f"{streams:>7} {rate:>6} |"
        found: dict[str, Row | str] = {}
        for name, client in clients.items():
            found[name] = client if isinstance(client, str) else _attempt(client, url, streams, rate, tokens)
            line += " " + _cell(found[name]) + " |"
        print(line, flush=True)
        splits.append(f"{streams:>7} {rate:>6} |" + "".join(_split_cell(found[name], found.get(CLIENTS["bare"]))
                                                             for name in _splitting(clients)))
    names = _splitting(clients)
    print("\nCPU while the streams are open and after the rounds (the plugin's reader, the bare loops); x bare: CPU "
          "while open against the bare epoll loop's in the same row\n"
          f"{'streams':>7} {'tok/s':>6} |" + "".join(f" {name:^35} |" for name in names))
    print(f"{'':>7} {'':>6} |" + f" {'us/tok':>9} {'core':>6} {'after':>9} {'x bare':>7} |" * len(names))
    print("\n".join(splits), flush=True)


def _splitting(clients: dict[str, Client | str]) -> list[str]:
    """The columns whose CPU is split into while streaming and after."""
    return [name for name, client in clients.items() if isinstance(client, Ours | BareLoop) and client.splits]


def _split_cell(row: Row | str, bare: Row | str | None) -> str:
    if not isinstance(row, Row) or row.split is None:
        return f" {'failed':^35} |"
    against = (f"x{row.split[0] / bare.split[0]:.2f}" if isinstance(bare, Row) and bare.split is not None
               else "")
    return f" {row.split[0]:>9.1f} {row.split[1]:>6.0%} {row.split[2]:>9.1f} {against:>7} |"


def _attempt(client: Client, url: str, streams: int, rate: float, tokens: int) -> Row | str:
    """The row, or why the client could not complete it (e.g. the `openai` package's 5 s connect timeout while
    its loop is saturated)."""
    try:
        return measure(client, url, streams, rate, tokens)
    except Exception as exc:  # a client that fails a row is a result, not the end of the benchmark
        return f"failed: {type(exc).__name__}: {exc}"


_CONTENT = re.compile(rb'"content":"([^"]+)"')
"""A content chunk's text in what the pacing server writes (the role chunk's empty content does not match)."""


class BareLoop:
    """A bare Python epoll loop: each stream on a kept-alive socket of its own, sent at once; each read goes into one
    buffer, is copied into a bytes object (as uvloop does) and stamped, and nothing is parsed until the round is
    over. What a reader costs on this machine with Python's system calls and no more (uvloop's read path is C, so a
    real reader can cost less): the column that tells the client's share of a figure from the machine's. With
    `kernel`, each socket asks for kernel receive stamps and each read is a `recvmsg_into()` stamped with the
    kernel's time (as the plugin stamps), so the column is what any Python reader pays for exact stamps. `cost`
    splits its CPU as Ours' does."""

    splits = True

    def __init__(self, *, kernel: bool = False) -> None:
        self.cost = ReadCost()
        self.kernel = kernel

    def __call__(self, url: str, streams: int, rate: float, tokens: int, rounds: int) -> list[list[Stream]]:
        self.cost = ReadCost()
        host, port = url.removeprefix("http://").split(":")
        body = orjson.dumps({"model": f"rate:{rate:g}", "messages": [{"role": "user", "content": "bench"}],
                             "stream": True, "max_tokens": tokens})
        request = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
                   f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
        if self.kernel:
            kernel_stamps.keep_on()
        sockets = [socket.create_connection((host, int(port))) for _ in range(streams)]
        poller = select.epoll()
        try:
            for sock in sockets:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.setblocking(False)
                if self.kernel:
                    kernel_stamps.enable(sock)
                poller.register(sock.fileno(), select.EPOLLIN)
            return [self._round(sockets, poller, request, 60 + tokens / (rate or 1e5)) for _ in range(rounds)]
        finally:
            poller.close()
            for sock in sockets:
                sock.close()

    def _round(self, sockets: list[socket.socket], poller: select.epoll, request: bytes,
               limit: float) -> list[Stream]:
        by_fd = {sock.fileno(): index for index, sock in enumerate(sockets)}
        stamps: list[list[float]] = [[] for _ in sockets]
        reads: list[list[bytes]] = [[] for _ in sockets]
        buffer = bytearray(1 << 18)
        view = memoryview(buffer)
        clock = kernel_stamps.Clock()
        sent = []
        started, wall = time.process_time(), perf_counter()
        for sock in sockets:
            sent.append(perf_counter())
            sock.sendall(request)
        deadline, left = perf_counter() + limit, set(by_fd)
        while left:
            if perf_counter() > deadline:
                raise TimeoutError(f"the bare loop: {len(left)} of {len(sockets)} streams unfinished after "
                                   f"{limit:.0f} s")
            for fd, _ in poller.poll(5.0):
                index = by_fd[fd]
                if self.kernel:
                    size, ancillary, _, _ = sockets[index].recvmsg_into((buffer,), kernel_stamps.ANCILLARY_SIZE)
                    stamps[index].append(_kernel_time(ancillary, clock))
                else:
                    size = sockets[index].recv_into(buffer)
                    stamps[index].append(perf_counter())
                data = bytes(view[:size])
                reads[index].append(data)
                if not data:  # closed by the server: the stream is over, and the socket of no use to a next round
                    poller.unregister(fd)
                if not data or data.endswith(b"0\r\n\r\n"):
                    left.discard(fd)
        streamed, wall = time.process_time(), perf_counter() - wall
        found = [_bare_stream(*stream) for stream in zip(sent, stamps, reads, strict=True)]
        self.cost.streaming += streamed - started
        self.cost.parsing += time.process_time() - streamed
        self.cost.seconds += wall
        return found


def _kernel_time(ancillary: list[tuple[int, int, bytes]], clock: kernel_stamps.Clock) -> float:
    """A read's kernel receive stamp on perf_counter()'s clock (the read's own time where it has none)."""
    now = perf_counter()
    if now > clock.stale_at:
        clock.refresh()
    if not ancillary or len(ancillary[0][2]) < kernel_stamps.TIMESPEC_SIZE:
        return now
    seconds, nanoseconds = kernel_stamps.unpack_timespec(ancillary[0][2])
    arrived: float = seconds + nanoseconds * 1e-9 + clock.offset
    return min(now, arrived)


def _bare_stream(sent: float, stamps: list[float], reads: list[bytes]) -> Stream:
    """A stream's content chunks, each stamped with the read that completed it."""
    data = b"".join(reads)
    ends = list(itertools.accumulate(len(read) for read in reads))
    times, texts = [], []
    for match in _CONTENT.finditer(data):
        times.append(stamps[bisect.bisect_left(ends, match.end())])
        texts.append(match.group(1).decode())
    return Stream(sent, tuple(times), "".join(texts))


def _print_ingest(url: str, clients: dict[str, Client | str]) -> None:
    print("\ningest, server at full speed: tokens/s taken in, parsing included (received while the streams were open)"
          f"\n{'':<30} |" + "".join(f" {name:^34} |" for name in clients))
    for streams, tokens in FLOOD:
        line = f"{streams:>4} streams x {tokens:>7} tokens  |"
        for client in clients.values():
            if isinstance(client, str):
                line += f" {'n/a':^34} |"
                continue
            try:
                rate, core, received = ingest(client, url, streams, tokens)
            except Exception as exc:  # as in _attempt
                line += f" {'failed: ' + type(exc).__name__:^34} |"
                continue
            line += f" {rate:>8,.0f} {core:>5.0%} " + (f"({received:>8,.0f})" if received else " " * 10) + " |"
        print(line, flush=True)


class _NoTransport:
    def write(self, data: bytes) -> None:
        pass

    def close(self) -> None:
        pass

    def get_extra_info(self, name: str) -> Any:
        return None


def read_path(defer: bool, tokens: int = 2_000) -> tuple[float, float]:
    """The reader's own cost, no socket: `data_received` fed one SGLang 0.5.23 chat chunk per read (with a request
    id and a model name of real length). Returns (us per read as the reads come, us per token after the
    answer is in: the deferred parse)."""
    from pytest_sglang_perf.measurement.wire import StreamProtocol

    def chunk(text: str) -> bytes:
        return _frame(b'data: {"id":"8a7f0c2e4b1d4f6e9a3c5b7d9e1f2a4c","object":"chat.completion.chunk","created":'
                      b'1764410000,"model":"Qwen/Qwen3.6-27B","choices":[{"index":0,"delta":{"role":null,"content":'
                      + orjson.dumps(text) + b',"reasoning_content":null,"tool_calls":null},"logprobs":null,'
                      b'"finish_reason":null,"matched_stop":null}],"usage":null}\n\n')

    reads = [chunk(f" w{k}") for k in range(tokens)]
    end = _tail(tokens)

    async def once() -> tuple[float, float]:
        protocol = StreamProtocol()
        protocol.connection_made(_NoTransport())  # type: ignore[arg-type]
        protocol.send(b"", _request(0, tokens), "bench", defer=defer)
        protocol.data_received(_HEAD)
        started = perf_counter()
        for data in reads:
            protocol.data_received(data)
        protocol.data_received(end)
        arrived = perf_counter()
        await protocol.ended
        if len(protocol.outcome().chunk_times) != tokens:
            raise RuntimeError("the reader lost a chunk")
        return (arrived - started) / tokens * 1e6, (perf_counter() - arrived) / tokens * 1e6

    async def best() -> tuple[float, float]:
        return min([await once() for _ in range(25)])

    result: tuple[float, float] = asyncio.run(best())
    return result


def _print_read_path() -> None:
    print("the reader's own cost, no socket (one SGLang chunk per read, best of 25)")
    for defer in (True, False):
        hot, after = read_path(defer)
        print(f"  {'deferred' if defer else 'live':>8}: {hot:4.1f} us per read as it comes, {after:4.1f} us per token "
              "after the answer is in", flush=True)
    print()


CLIENTS = {"ours": "ours", "loop": "ours, loop stamps", "live": "ours parsing live", "aiohttp": "ours via aiohttp",
           "bench_serving": "bench_serving", "openai": "openai", "bare": "bare epoll loop",
           "bare-kernel": "bare loop, kernel stamps"}
"""--clients' names: each column's heading."""


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=_rows, default=ROWS, metavar="SxR,...",
                        help="streams x tok/s per stream, e.g. 64x1000,256x250 (default: every row)")
    parser.add_argument("--clients", type=_clients, default=list(CLIENTS), metavar="NAME,...",
                        help=f"the columns, of {', '.join(CLIENTS)} (default: all)")
    parser.add_argument("--passes", type=int, default=1, metavar="N",
                        help="print the table N times, one pass after another (default 1): a figure that varies "
                             "between passes is the machine's")


def _rows(text: str) -> list[tuple[int, int]]:
    try:
        rows = [(int(streams), int(rate)) for streams, rate in (row.split("x") for row in text.split(","))]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected rows like 64x1000,256x250, got {text!r}") from None
    if not rows or any(streams < 1 or rate < 1 for streams, rate in rows):
        raise argparse.ArgumentTypeError(f"streams and tok/s must be at least 1, got {text!r}")
    return rows


def _clients(text: str) -> list[str]:
    names = text.split(",")
    unknown = [name for name in names if name not in CLIENTS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown client {', '.join(unknown)}: choose from {', '.join(CLIENTS)}")
    return names


def _chosen(names: Sequence[str]) -> dict[str, Client | str]:
    unavailable = _bench_serving_ready() if "bench_serving" in names else None
    if unavailable:
        print(f"bench_serving: {unavailable}\n")
    serving: Client | str = "not installed here (see above)" if unavailable else bench_serving
    exact: Client | str = BareLoop(kernel=True) if kernel_stamps.available() else "no kernel receive stamps here"
    made: dict[str, Client | str] = {"ours": Ours("wire"), "loop": Ours("wire-loop-stamps"), "live": Ours("wire-live"),
                                     "aiohttp": Ours("aiohttp"), "bench_serving": serving, "openai": openai_package,
                                     "bare": BareLoop(), "bare-kernel": exact}
    return {CLIENTS[name]: made[name] for name in names}


def main(args: argparse.Namespace) -> None:
    started = perf_counter()
    clients = _chosen(args.clients)
    with served(__file__) as (pid, url):
        pin(1)
        _print_read_path()
        print(f"pacing server {url} (pid {pid}), clients on another core; {ROUNDS} rounds after a warmup, "
              f"medians; {DECODE_SECONDS:g} s of decode per row (at most {MAX_TOKENS} tokens), server TTFT "
              f"{SERVER_TTFT * 1e3:g} ms\n")
        for done in range(args.passes):
            if args.passes > 1:
                print(f"pass {done + 1} of {args.passes}")
            _print_rows(url, clients, args.rows)
            print()
        _print_ingest(url, clients)
    print(f"\n(done in {perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    script(__doc__, serve, main, "run the pacing server (internal)", _options)
