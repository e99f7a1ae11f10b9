"""A streamed chat request on a bare asyncio connection: the reader behind every measurement (rounds.py; one stream
is a round of one).

Each read is handled in the protocol's `received(data, at, kernel)`: its stamp first, then HTTP/1.1 chunked
decoding (an index walk over the read, however many chunks it holds) and one SSE split per read, into the same
`StreamAccumulator` the aiohttp reader (client.py) feeds, so both judge a stream alike. There is no response object,
stream reader, async iterator or task wake-up per read: measured side by side (docs/client-measurement.md), this
reader's TTFT overhead is about half of aiohttp's, and it falls behind later at 128-256 streams. It speaks only what
SGLang's server answers: a status line and headers, then a chunked (or Content-Length, or read-until-close) body.

**Stamps.** On a plain-HTTP connection on Linux a read's stamp is when the kernel received it (SO_TIMESTAMPNS;
stamped_transport.py reads the socket with `recvmsg()`), so a chunk is not stamped late because the loop was busy
with other streams' reads when it came; over TLS, and elsewhere, it is the loop's `perf_counter()` as it hands the
read over (`data_received`). docs/client-measurement.md, "Kernel receive stamps", has what each costs.

**Deferred reads.** Parsing is most of a read's cost, and while N streams run, one stream's parsing delays the
stamps of the others' chunks. So a request sent with `defer=True` parses only its status line and headers as they
come; once they say a 200 chunked event stream, each later read is only stamped and kept (0.5 µs instead of ~7 µs
for an SGLang chunk), and the answer counts as arrived when its body ends as a chunked body does (a chunk's CRLF,
the zero-size chunk, an empty trailer; SGLang's events never hold a CR). `outcome()` then feeds the kept reads, with
their stamps, through the same parser in the same order, so a deferred answer reads exactly as a live one.
rounds.py defers when a round's answers fit its memory budget, and calls `outcome()` once the round's last stream
has ended (docs/client-measurement.md, "Deferred reads").

Each stream gets a connection of its own, opened before its first request (untimed) and kept alive for the next
ones; the request is one pre-built write. A stream that fails raises the same `RequestFailed` reasons as the aiohttp
reader.
"""

from __future__ import annotations

import asyncio
import socket
from array import array
from collections.abc import Callable
from time import perf_counter
from typing import cast
from urllib.parse import urlsplit

from pytest_sglang_perf.measurement.client import (
    CHAT_PATH,
    ERROR_BODY_LIMIT,
    ChatRequest,
    RequestFailed,
    StreamAccumulator,
    StreamRecord,
    broken_failure,
    clip_line,
    connect_failure,
    status_failure,
)
from pytest_sglang_perf.measurement.kernel_stamps import available as stamps_available
from pytest_sglang_perf.measurement.stamped_transport import open_stamped

_MAX_HEAD = 65536
_TERMINATOR = b"\r\n0\r\n\r\n"
"""How a chunked body ends: the last chunk's CRLF, then the zero-size chunk and the empty trailer."""
_EMPTY_BODY = _TERMINATOR[2:]
"""A chunked body with no chunk: the zero-size chunk right after the headers."""


class Endpoint:
    """Where the chat requests go, and the bytes of a request before its body."""

    def __init__(self, base_url: str, api_key: str | None, *, kernel_stamps: bool = True) -> None:
        parts = urlsplit(base_url.rstrip("/") + CHAT_PATH)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"expected an http(s):// URL, got {base_url!r}")
        self.url = parts.geturl()
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.tls = parts.scheme == "https"
        auth = f"Authorization: Bearer {api_key}\r\n" if api_key else ""
        named = f"[{self.host}]" if ":" in self.host else self.host  # an IPv6 address in brackets; no user:password
        host = named if parts.port is None else f"{named}:{parts.port}"
        self.kernel_stamps = kernel_stamps and not self.tls and stamps_available()
        """Whether this endpoint's reads carry the kernel's receive stamps (asked for, and a plain-HTTP connection on
        Linux), else the event loop's."""
        self._head = (f"POST {parts.path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                      f"Accept: text/event-stream\r\n{auth}").encode()

    def request(self, body: bytes) -> bytes:
        return self._head + b"Content-Length: %d\r\n\r\n" % len(body) + body

    async def connect(self, timeout: float) -> StreamProtocol:
        """A new connection, within `timeout` seconds (the request's whole timeout, as aiohttp counted it)."""
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                if self.kernel_stamps:
                    return await open_stamped(self.host, self.port, StreamProtocol)
                _, protocol = await loop.create_connection(StreamProtocol, self.host, self.port,
                                                           ssl=True if self.tls else None)
        except TimeoutError:
            raise connect_failure(self.url, TimeoutError(f"no connection within {timeout:g} s")) from None
        except OSError as exc:
            raise connect_failure(self.url, exc) from None
        return protocol


class StreamProtocol(asyncio.Protocol):
    """One kept-alive connection: `send()` a request, await `ended`, take its `outcome()`, send the next on it while
    it stays `open`."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.open = False
        self._reset(ChatRequest("", "", 1, 0.0, 0), "", defer=False)

    def _reset(self, chat: ChatRequest, url: str, *, defer: bool) -> None:
        """A new request on this connection: nothing of the last one's answer is kept."""
        self.ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        """Done when the answer is all in (or failed as it came: then it holds the RequestFailed)."""
        self._outcome: StreamRecord | RequestFailed | None = None
        self._defer = defer
        self._kept: bytearray | None = None
        """Deferred: the body's bytes not parsed yet, the reads one after another (each read's end in `_ends`, its
        stamp in `_stamps`: no object kept per read, and a read's own buffer is freed at once, so even a flood of
        large reads reuses memory instead of mapping new pages); None while reads are parsed as they come."""
        self._ends = array("q")
        self._stamps = array("d")
        self._acc = StreamAccumulator()
        self.reads = 0
        self.kernel_stamped = 0
        self._chat, self._url = chat, url
        self._t0 = 0.0
        self._buffer = b""
        self._head: tuple[int, dict[bytes, bytes]] | None = None
        self._remaining: int | None = None
        """A Content-Length body's bytes still expected; None: chunked, or a body that runs until the connection
        closes."""
        self._chunked = False
        self._streaming = False
        """A 200 event stream (else the body is kept as the error's text); known once the head is read."""
        self._payload_left = 0
        """Chunked: bytes of the current chunk's data still expected, then `_crlf_left` bytes of its CRLF; both 0:
        a chunk-size line comes next."""
        self._crlf_left = 0
        self._events = b""
        self._error_body = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass asyncio's
        self.open = True
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self, request: bytes, chat: ChatRequest, url: str, *, defer: bool = False) -> float:
        """Write the request; returns its send time (`perf_counter()`), the zero of its chunk times. With `defer`,
        an event stream's body is kept as it comes and parsed by `outcome()`."""
        assert self.transport is not None and self.open, "send() needs an open connection"
        self._reset(chat, url, defer=defer)
        self._t0 = perf_counter()
        self.transport.write(request)
        return self._t0

    def data_received(self, data: bytes) -> None:
        self.received(data, perf_counter())

    def received(self, data: bytes, at: float, kernel: bool = False) -> None:
        """One read, stamped `at` on `perf_counter()`'s clock: when it reached this host (`kernel`: a connection with
        kernel receive stamps, stamped_transport.py) or when the loop handed it over (`data_received`). The answer's
        reads and its kernel-stamped ones are counted (`reads`, `kernel_stamped`)."""
        self.reads += 1
        if kernel:
            self.kernel_stamped += 1
        t = at - self._t0
        if self._kept is not None:
            self._keep(data, t)
        elif self._outcome is None:
            self._guarded(self._feed, data, t)

    def _keep(self, data: bytes, t: float) -> None:
        """A deferred answer's read: stamp and keep, nothing else; arrived when its body ends a chunked body."""
        kept = self._kept
        assert kept is not None
        kept += data
        self._ends.append(len(kept))
        self._stamps.append(t)
        if kept.endswith(_TERMINATOR) or kept == _EMPTY_BODY:
            self._arrived()

    def outcome(self) -> StreamRecord:
        """The answer's record, once `ended` is done: parses what a deferred answer kept. Raises its RequestFailed."""
        self._catch_up()
        outcome = self._outcome
        if outcome is None:  # a terminator inside a chunk's data: never in SGLang's answers
            raise RequestFailed(f"the answer from POST {self._url} seemed to end (its last read ended as the chunked "
                                "terminator does) but its chunks did not: an event held a CR LF?")
        if isinstance(outcome, RequestFailed):
            raise outcome
        return outcome

    async def finished(self) -> StreamRecord:
        """Await `ended`, then the outcome."""
        await self.ended
        return self.outcome()

    def eof_received(self) -> bool:
        """The server closed its side: no request is sent on this connection again."""
        self.open = False
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.open = False
        if self._kept is not None and self.ended.done():
            return  # a deferred answer that arrived whole: outcome() parses it
        self._catch_up()
        if self._outcome is not None or not self._url:
            return
        if self._head is not None and not self._chunked and self._remaining is None:
            self._guarded(lambda _d, t: self._end(t), b"", perf_counter() - self._t0)  # a body that runs until close
            return
        closed = exc or ConnectionResetError("closed by the server")
        self._finish(broken_failure(self._url, len(self._acc.times), closed))

    def _guarded(self, step: Callable[[bytes, float], None], data: bytes, t: float) -> None:
        """Run a parsing step; whatever it raises fails this request (never the event loop's log, never a hang)."""
        try:
            step(data, t)
        except RequestFailed as failed:
            self._finish(failed)
        except Exception as exc:  # a malformed answer: say what, close the connection
            self._finish(RequestFailed(f"unreadable answer from POST {self._url}: {type(exc).__name__}: {exc}"))
            self.close()

    @property
    def chunks(self) -> int:
        """Content chunks received so far (a deferred answer's kept reads are parsed first)."""
        self._catch_up()
        return len(self._acc.times)

    def _arrived(self) -> None:
        if not self.ended.done():
            self.ended.set_result(None)

    def _catch_up(self) -> None:
        """Parse a deferred answer's kept reads, in order, each with its own stamp; from now on reads are parsed as
        they come (a connection lost mid-answer, a timeout's count of chunks, outcome())."""
        kept, self._kept = self._kept, None
        if kept is None:
            return
        start = 0
        with memoryview(kept) as view:
            for end, t in zip(self._ends, self._stamps, strict=True):
                if self._outcome is not None:
                    break
                self._guarded(self._feed, bytes(view[start:end]), t)
                start = end
        self._ends, self._stamps = array("q"), array("d")

    def close(self) -> None:
        self.open = False
        if self.transport is not None:
            self.transport.close()

    # parsing ------------------------------------------------------------------------------------------------

    def _feed(self, data: bytes, t: float) -> None:
        """One read: walk it with an index (a read can hold hundreds of chunks; nothing is copied per chunk), keep
        only an unfinished head or chunk-size line for the next read."""
        buf = self._buffer + data if self._buffer else data
        self._buffer = b""
        pos = 0
        if self._head is None:
            pos = self._read_head(buf)
            if pos < 0:
                self._buffer = buf
                return
            if self._remaining == 0:  # Content-Length: 0, an empty answer (a 401 without a body)
                self._end(t)
                return
            if self._defer and self._chunked and self._streaming:
                self._kept = bytearray()
                if pos < len(buf):
                    self._keep(buf[pos:], t)
                return
        if not self._chunked:
            while pos < len(buf) and self._outcome is None:
                pos = self._plain(buf, pos, t)
            return
        pieces: list[bytes] = []  # the read's chunk data, handed on at once: one SSE split per read
        last = self._unchunk(buf, pos, pieces)
        if pieces:
            self._body(b"".join(pieces), t)
        if last and self._outcome is None:
            self._end(t)

    def _unchunk(self, buf: bytes, pos: int, pieces: list[bytes]) -> bool:
        """Chunked transfer decoding of one read into `pieces`; True at the terminating zero-size chunk. Whole chunks
        (SGLang writes one event per chunk, so most reads hold only whole ones) take one pass of the inner loop
        each; a chunk cut by the read's end is finished by the next read."""
        end = len(buf)
        while pos < end:
            if self._payload_left or self._crlf_left:
                pos = self._partial(buf, pos, pieces)
                continue
            while True:  # whole chunks: size line, data, CRLF
                line_end = buf.find(b"\r\n", pos)
                if line_end < 0:
                    self._buffer = buf[pos:]
                    return False
                line = buf[pos:line_end]
                size = int(line if b";" not in line else line.partition(b";")[0], 16)
                if size == 0:
                    return True
                start = line_end + 2
                stop = start + size
                if stop + 2 > end:  # cut by the read's end
                    self._payload_left, self._crlf_left, pos = size, 2, start
                    break
                pieces.append(buf[start:stop])
                pos = stop + 2
                if pos >= end:
                    return False
        return False

    def _partial(self, buf: bytes, pos: int, pieces: list[bytes]) -> int:
        """The rest of a chunk an earlier read cut: its data, then its CRLF; the position after what was taken."""
        end = len(buf)
        if self._payload_left:
            take = min(self._payload_left, end - pos)
            pieces.append(buf[pos:pos + take])
            self._payload_left -= take
            return pos + take
        skip = min(self._crlf_left, end - pos)
        self._crlf_left -= skip
        return pos + skip

    def _plain(self, buf: bytes, pos: int, t: float) -> int:
        """A Content-Length body (or one that runs until the connection closes): its next piece."""
        take = len(buf) - pos if self._remaining is None else min(self._remaining, len(buf) - pos)
        self._body(buf[pos:pos + take], t)
        if self._remaining is not None:
            self._remaining -= take
            if self._remaining == 0:
                self._end(t)
        return pos + take

    def _read_head(self, buf: bytes) -> int:
        """Parse the status line and headers; the position after them, or -1 when they are not complete."""
        start = len(buf) - len(buf.lstrip(b"\r\n"))  # the CRLF after the last answer's zero chunk, if late
        end = buf.find(b"\r\n\r\n", start)
        if end < 0:
            if len(buf) > _MAX_HEAD:
                raise RequestFailed(f"the answer from POST {self._url} has no end of headers after {_MAX_HEAD} bytes")
            return -1
        lines = buf[start:end].split(b"\r\n")
        try:
            status = int(lines[0].split(b" ", 2)[1])
        except (IndexError, ValueError):
            raise RequestFailed(f"not an HTTP answer from POST {self._url}: "
                                f"{clip_line(lines[0].decode(errors='replace'))}") from None
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        self._head = (status, headers)
        self._streaming = status == 200 and b"text/event-stream" in headers.get(b"content-type", b"").lower()
        version, connection = lines[0].split(b" ", 1)[0], headers.get(b"connection", b"").lower()
        if connection == b"close" or (version == b"HTTP/1.0" and connection != b"keep-alive"):
            self.open = False  # the server closes it after this answer: the next request takes a new one
        self._chunked = b"chunked" in headers.get(b"transfer-encoding", b"").lower()
        length = headers.get(b"content-length")
        self._remaining = None if self._chunked or length is None else int(length)
        return end + 4

    def _body(self, piece: bytes, t: float) -> None:
        if not self._streaming:
            self._error_body = (self._error_body + piece)[:ERROR_BODY_LIMIT]
            return
        events = (self._events + piece if self._events else piece).split(b"\n\n")
        self._events = events.pop()
        self._acc.feed_events(events, t)

    def _end(self, t: float) -> None:
        assert self._head is not None and self._chat is not None
        status, headers = self._head
        if status != 200:
            raise status_failure(status, self._url, self._error_body.decode(errors="replace"))
        kind = headers.get(b"content-type", b"").decode(errors="replace")
        if "text/event-stream" not in kind.lower():
            raise RequestFailed(f"expected a text/event-stream answer from POST {self._url}, got {kind or 'nothing'}: "
                                f"{clip_line(self._error_body.decode(errors='replace'))} (does the server support "
                                "stream=true?)", status=200, body=self._error_body.decode(errors="replace"))
        if self._events.strip():
            self._acc.feed_event(self._events, t)
        self._finish(self._acc.record(self._chat, self._t0))

    def _finish(self, outcome: StreamRecord | RequestFailed) -> None:
        if self._outcome is not None:
            return
        self._outcome = outcome
        if self.ended.done():
            return
        if isinstance(outcome, RequestFailed):
            self.ended.set_exception(outcome)
        else:
            self.ended.set_result(None)
