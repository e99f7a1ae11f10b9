"""server/ports.py: a free port that every SGLang release starts on (0.5.13 refuses a port above 55535: its derived
gRPC port, `--port` + 10000, must stay below 65536; published in the older-release lane, docs/sglang-versions.md)."""

from __future__ import annotations

import socket

from pytest_sglang_perf.server.ports import HIGHEST, free_port


def test_every_port_handed_out_binds_and_leaves_room_for_the_derived_grpc_port() -> None:
    ports = [free_port() for _ in range(200)]  # the kernel's ephemeral range reaches 60999: some picks are redrawn
    assert all(1024 < port <= HIGHEST == 55535 for port in ports)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", ports[-1]))  # free when handed out
