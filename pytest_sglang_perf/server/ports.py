"""A free TCP port to launch a server on."""

from __future__ import annotations

import random
import socket

HIGHEST = 65535 - 10000
"""The highest port handed out. SGLang 0.5.13 derives a gRPC port as `--port` + 10000 at every start and stops with
`ValueError: SGLANG_GRPC_PORT (70885) must be between 1 and 65535` above it, gRPC in use or not
(sglang/srt/server_args.py `_handle_deprecated_args`; from 0.5.16 only when gRPC is used); the kernel's ephemeral
ports reach 60999."""
LOWEST = 20000
_TRIES = 200


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS reports free on `host` right now, at most HIGHEST: the kernel's pick when it is low enough, else
    a random one of LOWEST..HIGHEST that binds (bind, read it back, release it).

    Another process can still take it before the server binds it; the launcher retries once with a
    new port when the server's log says the address was in use.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    for attempt in range(_TRIES):
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, 0 if attempt == 0 else random.randint(LOWEST, HIGHEST)))
            except OSError:
                continue
            port: int = sock.getsockname()[1]
        if port <= HIGHEST:
            return port
    raise OSError(f"no free TCP port at or below {HIGHEST} on {host} after {_TRIES} tries")
