"""The `sglang_perf` fixture's handle: measure a fixed prompt on this variant's server, then gate it.

pytest-facing: a failed request or a regression fails the test (`pytest.fail`), with the report as its message.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import pytest

from pytest_sglang_perf.gate.baseline import BaselineFileError
from pytest_sglang_perf.gate.compare import Verdict
from pytest_sglang_perf.gate.terminal import failure_message
from pytest_sglang_perf.measurement.result import RequestParams, Result
from pytest_sglang_perf.session import PerfSession
from pytest_sglang_perf.variant_run import VariantRun

if TYPE_CHECKING:
    import openai

    from pytest_sglang_perf.measurement.client import StreamRecord


_EXIT_WAIT = 0.5
"""Seconds a failed request waits for a dying server process to finish exiting, to say how it ended."""


class SGLangPerf:
    """What a test gets from the `sglang_perf` fixture: one variant's running server."""

    def __init__(self, session: PerfSession, run: VariantRun, nodeid: str) -> None:
        assert run.server is not None, "a variant's handle needs its running server"
        self._session = session
        self._run = run
        self.variant = run.variant
        self.server = run.server
        self._nodeid = nodeid

    @property
    def base_url(self) -> str:
        return self.server.base_url

    @property
    def simulated(self) -> bool:
        return self._session.options.simulate

    @property
    def model(self) -> str:
        return self._session.settings.model

    @cached_property
    def openai(self) -> openai.OpenAI:
        """An `openai.OpenAI` client bound to this variant's server, for the test's own functional checks."""
        from pytest_sglang_perf.measurement.openai_client import make_openai_client

        return make_openai_client(self.base_url, self.server.plan.api_key)

    def close(self) -> None:
        """Close the `openai` client if the test made one (the fixture calls this when the test ends)."""
        client = self.__dict__.pop("openai", None)
        if client is not None:
            client.close()

    def measure(self, prompt: str, *, max_tokens: int | None = None, temperature: float | None = None,
                repeats: int | None = None, warmup: int | None = None, seed: int | None = None) -> Result:
        """Send `prompt` as streamed chat requests (warmup, then repeats) and return samples and summaries."""
        __tracebackhide__ = True
        from pytest_sglang_perf.measurement.client import RequestFailed
        from pytest_sglang_perf.measurement.measure import measure

        params = self._params(prompt, max_tokens, temperature, repeats, warmup, seed)
        try:
            return measure(
                self.base_url, model=self.model, variant=self.variant.name, params=params,
                boot_seconds=self.server.boot_seconds, simulated=self.simulated,
                api_key=self.server.plan.api_key, timeout=self._session.settings.request.timeout,
                startup=self._run.startup,
            )
        except RequestFailed as exc:
            failure = (f"[{self.variant.name}] request failed: {exc}{self._server_gone()}\n"
                       f"server log: {self.server.log_path}")
        pytest.fail(failure, pytrace=False)  # outside the except block: no "During handling of ..." chain

    def cross_check(self, prompt: str, *, max_tokens: int | None = None, temperature: float | None = None,
                    seed: int | None = None) -> StreamRecord:
        """Send the request `measure()` would send through the `openai` package instead (one request).

        For functional checks that the two clients agree (tokens, text, speculative statistics); its timings
        carry the `openai` package's overhead, so never gate on them.
        """
        __tracebackhide__ = True
        from pytest_sglang_perf.measurement.client import ChatRequest, RequestFailed
        from pytest_sglang_perf.measurement.openai_client import cross_check

        params = self._params(prompt, max_tokens, temperature, 1, 0, seed)
        request = ChatRequest(model=self.model, prompt=prompt, max_tokens=params.max_tokens,
                              temperature=params.temperature, seed=params.seed,
                              timeout=self._session.settings.request.timeout)
        try:
            return cross_check(self.base_url, request, self.server.plan.api_key)
        except RequestFailed as exc:
            pytest.fail(f"[{self.variant.name}] request through openai failed: {exc}", pytrace=False)

    def _server_gone(self) -> str:
        """Says so when the server process has ended (the request failed because the server died)."""
        ended = self.server.exit_description(_EXIT_WAIT)
        return "" if ended is None else f"\nthe server process (pid {self.server.pid}) is gone: {ended}"

    def _params(self, prompt: str, max_tokens: int | None, temperature: float | None, repeats: int | None,
                warmup: int | None, seed: int | None) -> RequestParams:
        defaults = self._session.settings.request
        return RequestParams(
            prompt=prompt,
            max_tokens=defaults.max_tokens if max_tokens is None else max_tokens,
            temperature=defaults.temperature if temperature is None else temperature,
            seed=defaults.seed if seed is None else seed,
            repeats=defaults.repeats if repeats is None else repeats,
            warmup=defaults.warmup if warmup is None else warmup,
        )

    def check(self, result: Result) -> None:
        """Gate `result` on this test's baseline; fails the test on a regression (see the README)."""
        __tracebackhide__ = True
        if result.variant != self.variant.name:
            raise ValueError(f"result of variant {result.variant!r} checked in variant {self.variant.name!r}")
        try:
            cell = self._session.check(self.test_id, result)
        except BaselineFileError as exc:
            pytest.fail(str(exc), pytrace=False)
        if cell.verdict is Verdict.REGRESSED:
            context = self._session.server_lines(self._run)
            pytest.fail(failure_message(cell, self._session.refresh_command(self._nodeid), context), pytrace=False)

    @property
    def test_id(self) -> str:
        """The node id without the variant's parameter: the key of this test's baselines."""
        return strip_variant(self._nodeid, self.variant.name)


def strip_variant(nodeid: str, variant: str) -> str:
    for suffix, replacement in ((f"[{variant}]", ""), (f"-{variant}]", "]")):
        if nodeid.endswith(suffix):
            return nodeid[: -len(suffix)] + replacement
    return nodeid
