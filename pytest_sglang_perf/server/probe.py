"""Readiness probes of a booting server: does its port accept connections, what does `GET path` answer, which
process listens on the port.

Plain Python (no pytest); stdlib `http.client` only, so importing this module stays cheap.
"""

from __future__ import annotations

import http.client
import socket
from collections.abc import Iterable, Mapping

import psutil


def http_status(host: str, port: int, path: str, headers: Mapping[str, str], timeout: float) -> int | None:
    """The status of `GET path`, or None when nothing answers (port closed, reset, timeout)."""
    connection = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        connection.request("GET", path, headers=dict(headers))
        response = connection.getresponse()
        response.read()
        return response.status
    except (OSError, http.client.HTTPException):
        return None
    finally:
        connection.close()


def port_open(host: str, port: int, timeout: float) -> bool:
    """Whether something accepts TCP connections on the port (SGLang keeps it closed until it is loaded)."""
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError:
        return False
    return True


def listens_on(processes: Iterable[psutil.Process], port: int) -> bool | None:
    """Whether one of `processes` listens on `port`; None when the OS does not tell."""
    for process in processes:
        try:
            sockets = process.net_connections(kind="tcp")
        except psutil.AccessDenied:
            return None
        except psutil.NoSuchProcess:
            continue
        if any(s.status == psutil.CONN_LISTEN and s.laddr and s.laddr.port == port for s in sockets):
            return True
    return False
