"""Remote servers: a variant measured on an SGLang server that already runs (a Kubernetes deployment, a multi-node
server) instead of one the session boots.

Plain Python (no pytest). A variant's `url` (or `--sglang-url`, for the one variant a run selects) names the
server. The session attaches instead of booting: it checks that the server answers `GET /health` (always open, even
with `--api-key`: docs/sglang-0.5.23.md §2.2) and that `GET /server_info` accepts the key, then reads the effective
configuration from `/server_info` and compares it with the variant's args as for a booted server. Nothing is started
or stopped. The keys come from the environment (`SGLANG_PERF_API_KEY`, `SGLANG_PERF_ADMIN_API_KEY`, server/plan.py).
There is no log to read: startup facts are unknown, and the variant's log file says so. docs/scaling.md has
the SGLang facts this relies on.
"""

from __future__ import annotations

import http.client
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from pytest_sglang_perf.server.boot import RunningServer
from pytest_sglang_perf.server.launcher import BootError
from pytest_sglang_perf.server.plan import API_KEY_ENV, ServerPlan
from pytest_sglang_perf.server.redaction import redact_argv

REMOTE_GPU = "remote"
"""The GPU name of a remote server whose variant names none (`gpu = ...`, --sglang-remote-gpu): its baseline key
reads `<N>xremote`, apart from every local GPU's."""


class RemoteUnavailable(BootError):
    """A remote server that cannot be measured; a BootError, so the variant's tests fail with this report."""

    def __init__(self, plan: ServerPlan, reason: str, log_path: Path) -> None:
        super().__init__(name=plan.variant.name, command=f"(remote) {plan.url}", reason=reason, log_path=log_path)
        self.args = (f"SGLang server {plan.variant.name!r} (remote, {plan.url}) cannot be measured: {reason}",)
        self._expected = " ".join(redact_argv(plan.args)) or "(no args)"

    def report(self) -> str:
        return f"{self}\n  expected to run: {self._expected}\n  (not started by this run: nothing was booted)"


def attach_server(plan: ServerPlan, log_path: Path, timeout: float, say: Callable[[str], None]) -> RunningServer:
    """The remote server as a test sees it, once it answers; raises BootError saying why it cannot be measured."""
    assert plan.url is not None
    url = plan.url
    problem = _health_problem(url, timeout) or _key_problem(url, plan.api_key, timeout)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.write_text(f"remote server {url}: not started by this run, so it has no log here; its startup facts "
                        "are unknown\n", encoding="utf-8")
    if problem is not None:
        raise RemoteUnavailable(plan, problem, log_path)
    say(f"[{plan.variant.name}] attached to the running server at {url} (remote: not booted, not stopped)")
    return RunningServer(plan, url, 0.0, None, log_path)


def _health_problem(url: str, timeout: float) -> str | None:
    status = _status(f"{url}/health", None, timeout)
    if status == 200:
        return None
    answer = "no answer" if isinstance(status, str) else f"HTTP {status}"
    return (f"the remote server {url} is not ready: GET /health gave {answer}; start it (or wait until it logs "
            f"'The server is fired up and ready to roll!'), or fix the variant's url / --sglang-url"
            + (f" ({status})" if isinstance(status, str) else ""))


def _key_problem(url: str, api_key: str | None, timeout: float) -> str | None:
    status = _status(f"{url}/server_info", api_key, timeout)
    if status in (401, 403):
        given = "the key in " + API_KEY_ENV if api_key else f"no key ({API_KEY_ENV} is not set)"
        return (f"the remote server {url} refused {given}: GET /server_info gave HTTP {status}; set {API_KEY_ENV} to "
                "the server's --api-key")
    return None


def _status(url: str, api_key: str | None, timeout: float) -> int | str:
    """The HTTP status of GET `url`, or why there was none."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout) as response:
            response.read()
            return int(response.status)
    except urllib.error.HTTPError as exc:
        exc.close()
        return int(exc.code)
    except (OSError, ValueError, http.client.HTTPException) as exc:  # HTTPException: not an HTTP server there
        return str(getattr(exc, "reason", exc)) or type(exc).__name__
