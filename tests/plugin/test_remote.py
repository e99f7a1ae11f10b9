"""Remote servers: `--sglang-url` and a variant's `url` measure a server that already runs (here a simulator process
this test starts, standing for a Kubernetes deployment): no boot, no stop, /server_info still checked against the
variant's args, the API key from SGLANG_PERF_API_KEY; the results of several runners merge into one baselines folder
with `sglang-perf baseline accept`."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from perf_project import FAST_SIM, LOOSE, TINY_CONFIG, write_project

from pytest_sglang_perf.cli import main as cli
from pytest_sglang_perf.server.ports import free_port

KEY = "remote-secret"
TEST = """
def test_x(sglang_perf):
    sglang_perf.check(sglang_perf.measure("Say hi", max_tokens=24, repeats=2, warmup=0))
"""


class Remote:
    """A simulator process started outside the plugin, as a deployment would run SGLang."""

    def __init__(self, folder: Path, *args: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        (folder / "config.json").write_text(json.dumps(TINY_CONFIG))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = (folder / "server.log").open("wb")
        command = [sys.executable, "-m", "pytest_sglang_perf.simulator", "--model-path", str(folder),
                   "--port", str(self.port), "--api-key", KEY, *FAST_SIM, *args]
        self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT)
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.process.poll() is None, "the remote simulator exited"
            connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
            try:
                connection.request("GET", "/health")
                if connection.getresponse().status == 200:
                    return
            except OSError:
                pass
            finally:
                connection.close()
            time.sleep(0.2)
        raise AssertionError("the remote simulator did not become ready")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
        self._log.close()


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[Remote]:
    server = Remote(tmp_path / "remote-model", "--random-seed", "0")
    yield server
    server.stop()


def _project(pytester: pytest.Pytester, variants: dict[str, object]) -> None:
    write_project(pytester, variants, extra=LOOSE)  # type: ignore[arg-type]
    pytester.makepyfile(test_perf=TEST)


def test_a_running_server_is_measured_without_booting_or_stopping_it(pytester: pytest.Pytester, remote: Remote,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    _project(pytester, {"default": []})
    monkeypatch.setenv("SGLANG_PERF_API_KEY", KEY)
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-url", remote.url, "-v",
                                           "--sglang-update-baselines", "--sglang-results", "results.json")
    result.assert_outcomes(passed=1)
    out = " ".join(result.stdout.str().split())
    assert f"attached to the running server at {remote.url} (remote: not booted, not stopped)" in out
    assert "effective configuration: ok (1 requested flag(s) verified against /server_info)" in out
    assert f"startup: not observed: the server at {remote.url} is remote" in out
    assert "capture not known (no server log: the server is remote)" in out
    assert remote.process.poll() is None  # not stopped
    doc = json.loads((pytester.path / "results.json").read_text())
    assert doc["servers"]["default"]["url"] == remote.url
    assert doc["servers"]["default"]["boot_seconds"] is None
    (cell,) = doc["cells"]
    assert cell["verdict"] == "updated" and "boot_seconds" not in cell["metrics"]  # no boot was measured
    assert KEY not in (pytester.path / "results.json").read_text()
    assert "POST /v1/chat/completions" in (remote.folder / "server.log").read_text()


@pytest.mark.slow
def test_a_remote_server_that_ran_other_args_is_reported(pytester: pytest.Pytester, remote: Remote,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The variant says what the server should run; /server_info says what it runs."""
    _project(pytester, {"chunked": ["--chunked-prefill-size", "4096"]})
    monkeypatch.setenv("SGLANG_PERF_API_KEY", KEY)
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-url", remote.url, "--sglang-strict-flags")
    result.assert_outcomes(failed=1)
    out = " ".join(result.stdout.str().split())
    assert "--chunked-prefill-size" in out and "8192" in out


def test_a_remote_server_wants_its_api_key_from_the_environment(pytester: pytest.Pytester, remote: Remote) -> None:
    _project(pytester, {"default": []})
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-url", remote.url)
    result.assert_outcomes(errors=1)
    out = " ".join(result.stdout.str().split())
    assert (f"SGLang server 'default' (remote, {remote.url}) cannot be measured: the remote server {remote.url} "
            "refused no key (SGLANG_PERF_API_KEY is not set): GET /server_info gave HTTP 401") in out
    assert remote.process.poll() is None


def test_one_url_for_several_variants_is_refused(pytester: pytest.Pytester) -> None:
    _project(pytester, {"a": [], "b": ["--chunked-prefill-size", "4096"]})
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-url", "http://127.0.0.1:1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "one running server runs one variant, and this run selects 2 (a, b); add --sglang-variants NAME" in \
        " ".join(result.stderr.str().split())
    bad = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-url", "10.0.0.5:30000")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert "--sglang-url: expected a server's base URL" in bad.stderr.str()


@pytest.mark.slow
def test_runners_of_a_matrix_merge_their_results_into_one_baselines_folder(
        pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runners, each measuring its own remote server (a variant's `url`), write results files; one accept merges
    them into the baselines folder."""
    first = Remote(tmp_path / "runner-a", "--random-seed", "0")
    second = Remote(tmp_path / "runner-b", "--random-seed", "0", "--chunked-prefill-size", "4096")
    try:
        _project(pytester, {"a": {"args": [], "url": first.url},
                            "b": {"args": ["--chunked-prefill-size", "4096"], "url": second.url}})
        monkeypatch.setenv("SGLANG_PERF_API_KEY", KEY)
        for name in ("a", "b"):
            run = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-variants", name,
                                                "--sglang-results", f"results-{name}.json")
            run.assert_outcomes(passed=1)
        assert first.process.poll() is None and second.process.poll() is None
    finally:
        first.stop()
        second.stop()
    baselines = pytester.path / "baselines"
    code = cli.main(["baseline", "accept", "--new-environment", "--dir", str(baselines),
                     str(pytester.path / "results-a.json"), str(pytester.path / "results-b.json")])
    assert code == 0
    (stored,) = baselines.glob("*.json")
    entries = json.loads(stored.read_text())["entries"]
    assert sorted(entries["test_perf.py::test_x"]) == ["a", "b"]
