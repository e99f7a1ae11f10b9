"""Kernel receive stamps (measurement/kernel_stamps.py, stamped_transport.py): a read is stamped when it reached the
host, however late the event loop gets to it; the transport writes, ends and closes as an asyncio transport does."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import Callable, Coroutine, Iterator
from time import perf_counter
from typing import Any

import pytest

from pytest_sglang_perf.measurement import kernel_stamps
from pytest_sglang_perf.measurement.stamped_transport import StampedTransport, open_stamped
from pytest_sglang_perf.measurement.wire import Endpoint

pytestmark = [pytest.mark.skipif(not kernel_stamps.available(), reason="kernel receive stamps are Linux's"),
              pytest.mark.usefixtures("stamping_on")]

BUSY = 0.3
"""Seconds the loop is kept from reading (a blocking sleep in it: a busy client)."""


class Recorder:
    """A Receiver that keeps what the transport told it, and when the loop ran each read's callback."""

    def __init__(self) -> None:
        self.reads: list[tuple[bytes, float, float]] = []
        """(data, its stamp, perf_counter() when the loop handed it over)."""
        self.kernel: list[bool] = []
        self.events: list[str] = []
        self.transport: Any = None
        self.lost: asyncio.Future[Exception | None] = asyncio.get_running_loop().create_future()
        self.read_once: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def received(self, data: bytes, at: float, kernel: bool) -> None:
        self.reads.append((data, at, perf_counter()))
        self.kernel.append(kernel)
        if not self.read_once.done():
            self.read_once.set_result(None)

    def eof_received(self) -> bool:
        self.events.append("eof")
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.events.append("lost")
        if not self.lost.done():
            self.lost.set_result(exc)


@pytest.fixture(scope="module")
def stamping_on() -> Iterator[None]:
    """Linux turns its receive stamping on a moment after the first socket asks for it (net_enable_timestamp defers
    it to a work queue), and off when the last one closes: until then a read has no stamp and gets the loop's. One
    socket that asks, open for the whole module, keeps it on, as a round's open connections do."""
    with socket.socket() as keeper:
        assert kernel_stamps.enable(keeper)
        time.sleep(0.05)
        yield


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server


def _loops() -> list[Any]:
    runners: list[Any] = [pytest.param(asyncio.run, id="asyncio")]
    try:
        import uvloop
    except ImportError:
        return runners
    return [*runners, pytest.param(uvloop.run, id="uvloop")]


Runner = Callable[[Coroutine[Any, Any, Any]], Any]


async def _connected(server: socket.socket) -> tuple[Recorder, socket.socket]:
    recorder: Recorder | None = None

    def made() -> Recorder:
        nonlocal recorder
        recorder = Recorder()
        return recorder

    await open_stamped("127.0.0.1", server.getsockname()[1], made)
    peer, _ = server.accept()
    assert recorder is not None and isinstance(recorder.transport, StampedTransport)
    return recorder, peer


@pytest.mark.parametrize("run", _loops())
def test_a_read_is_stamped_when_it_arrived_not_when_the_busy_loop_got_to_it(run: Runner,
                                                                             listener: socket.socket) -> None:
    async def scenario() -> tuple[float, float, float]:
        recorder, peer = await _connected(listener)
        with peer:
            sent = perf_counter()
            peer.sendall(b"chunk")
            time.sleep(BUSY)  # the loop cannot read meanwhile
            await asyncio.wait_for(recorder.read_once, 5)
            recorder.transport.close()
        (data, at, handed), = recorder.reads
        assert data == b"chunk" and recorder.kernel == [True]
        return sent, at, handed

    sent, at, handed = run(scenario())
    assert handed - sent >= BUSY  # what an event loop's stamp would have said
    assert -1e-4 < at - sent < BUSY / 3, f"stamped {at - sent:.6f} s after the send"


def test_the_loop_stamped_reader_is_late_by_the_loops_delay(listener: socket.socket) -> None:
    """The same busy loop with the event loop's stamps (as over TLS): the chunk's time is the loop's. The contrast
    the kernel stamps are for, and the check that the test above can tell them apart."""

    async def scenario() -> float:
        endpoint = Endpoint(f"http://127.0.0.1:{listener.getsockname()[1]}", None, kernel_stamps=False)
        assert not endpoint.kernel_stamps
        protocol = await endpoint.connect(5.0)
        assert not isinstance(protocol.transport, StampedTransport)
        stamps: list[float] = []
        def keep(data: bytes, at: float, kernel: bool = False) -> None:
            stamps.append(at)

        protocol.received = keep  # type: ignore[method-assign]
        peer, _ = listener.accept()
        with peer:
            sent = perf_counter()
            peer.sendall(b"chunk")
            time.sleep(BUSY)
            for _ in range(500):
                if stamps:
                    break
                await asyncio.sleep(0.01)
            protocol.close()
        return stamps[0] - sent

    assert asyncio.run(scenario()) >= BUSY


def test_each_read_of_a_stream_gets_its_own_arrival(listener: socket.socket) -> None:
    """Three chunks, each sent while the loop is kept busy for 50 ms and read before the next is sent: each read's
    stamp is its own chunk's arrival (the clocks' offset is read again between them)."""

    async def scenario() -> list[float]:
        recorder, peer = await _connected(listener)
        delays = []
        with peer:
            for count in range(1, 4):
                sent = perf_counter()
                peer.sendall(b"x")
                time.sleep(0.05)
                for _ in range(500):
                    if len(recorder.reads) == count:
                        break
                    await asyncio.sleep(0.001)
                delays.append(recorder.reads[-1][1] - sent)
            recorder.transport.close()
        return delays

    delays = asyncio.run(scenario())
    assert all(-1e-4 < delay < 0.02 for delay in delays), delays


def test_a_write_the_socket_cannot_take_at_once_arrives_whole(listener: socket.socket) -> None:
    payload = bytes(range(256)) * (64 * 1024)  # 16 MiB: more than the socket buffers hold

    def drain(peer: socket.socket) -> bytes:
        got = bytearray()
        while len(got) < len(payload):
            data = peer.recv(1 << 20)
            if not data:
                break
            got += data
        return bytes(got)

    async def scenario() -> bytes:
        recorder, peer = await _connected(listener)
        with peer:
            recorder.transport.write(payload[:1000])
            recorder.transport.write(payload[1000:])  # queued behind what the socket has not taken
            got = await asyncio.to_thread(drain, peer)
        recorder.transport.close()
        return got

    assert asyncio.run(scenario()) == payload


def test_the_server_closing_is_an_end_of_file_then_one_loss(listener: socket.socket) -> None:
    async def scenario() -> tuple[list[str], Exception | None, bool]:
        recorder, peer = await _connected(listener)
        peer.close()
        lost = await asyncio.wait_for(recorder.lost, 5)
        recorder.transport.close()  # closing again tells the protocol nothing more
        await asyncio.sleep(0.01)
        return recorder.events, lost, recorder.transport.is_closing()

    events, lost, closing = asyncio.run(scenario())
    assert events == ["eof", "lost"] and lost is None and closing


def test_closing_stops_reading_and_frees_the_socket(listener: socket.socket) -> None:
    async def scenario() -> tuple[list[str], int]:
        recorder, peer = await _connected(listener)
        with peer:
            sock = recorder.transport.get_extra_info("socket")
            recorder.transport.close()
            peer.sendall(b"late")
            await asyncio.sleep(0.05)
            return recorder.events, sock.fileno()

    events, fileno = asyncio.run(scenario())
    assert events == ["lost"] and fileno == -1


def test_a_refused_connection_raises_the_os_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
    with pytest.raises(ConnectionRefusedError):
        asyncio.run(open_stamped("127.0.0.1", port, Recorder))


def test_tls_keeps_the_loops_stamps() -> None:
    assert not Endpoint("https://example.invalid", None).kernel_stamps
    assert Endpoint("http://127.0.0.1:1", None).kernel_stamps


def test_the_clock_follows_the_wall_clock_within_its_refresh() -> None:
    clock = kernel_stamps.Clock()
    clock.refresh()
    wall, here = time.time(), perf_counter()
    assert abs(wall + clock.offset - here) < 0.01
    assert clock.stale_at - here <= kernel_stamps.Clock.REFRESH


def test_a_stream_protocol_reads_through_the_stamped_transport(listener: socket.socket) -> None:
    """wire.py's reader on a stamped connection: a chunk the busy loop reads late keeps its arrival as its time."""
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    event = b'data: {"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}\n\n'
    usage = b'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}\n\n'

    def chunk(data: bytes) -> bytes:
        return b"%x\r\n%s\r\n" % (len(data), data)

    async def scenario() -> tuple[float, list[float]]:
        from pytest_sglang_perf.measurement.client import ChatRequest

        endpoint = Endpoint(f"http://127.0.0.1:{listener.getsockname()[1]}", None)
        protocol = await endpoint.connect(5.0)
        assert isinstance(protocol.transport, StampedTransport)
        peer, _ = listener.accept()
        with peer:
            chat = ChatRequest(model="m", prompt="p", max_tokens=2, temperature=0.0, seed=0)
            t0 = protocol.send(endpoint.request(b"{}"), chat, endpoint.url, defer=True)
            peer.sendall(head + chunk(event))
            await asyncio.sleep(0.05)  # read at once
            second = perf_counter()
            peer.sendall(chunk(event))
            time.sleep(BUSY)  # read late
            await asyncio.sleep(0.05)
            peer.sendall(chunk(usage) + chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
            record = await asyncio.wait_for(protocol.finished(), 5)
            protocol.close()
        assert record.text == "aa"
        assert protocol.reads == protocol.kernel_stamped >= 3  # head and chunk, chunk, the end: three sends
        return second - t0, list(record.chunk_times)

    second, times = asyncio.run(scenario())
    assert -1e-4 < times[1] - second < BUSY / 3, times


@pytest.mark.parametrize("run", _loops())
def test_a_reset_that_comes_with_the_data_is_reported(run: Runner, listener: socket.socket) -> None:
    """The server writes and resets at once: the data is read, then the reset is lost. (With a reader per socket on
    uvloop's `add_reader` the reset was never reported, and a stream waited out its whole timeout.)"""

    async def scenario() -> tuple[list[bytes], Exception | None]:
        recorder, peer = await _connected(listener)
        peer.sendall(b"chunk")
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        peer.close()  # a reset, not a clean close
        lost = await asyncio.wait_for(recorder.lost, 5)
        return [data for data, _, _ in recorder.reads], lost

    reads, lost = run(scenario())
    assert b"".join(reads) == b"chunk" and isinstance(lost, ConnectionResetError)
