"""A free TCP port to launch a server on."""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS reports free on `host` right now (bind to port 0, read it back, release it).

    Another process can still take it before the server binds it; the launcher retries once with a
    new port when the server's log says the address was in use.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
    return port
