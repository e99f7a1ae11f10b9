"""The `sglang_perf` fixture's handle: measure a fixed prompt on this variant's server, then gate it.

pytest-facing: a failed request or a regression fails the test (`pytest.fail`), with the report as its message.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Literal, overload

import pytest

from pytest_sglang_perf import SGLangPrefixCacheWarning
from pytest_sglang_perf.config.request import parse_slo
from pytest_sglang_perf.gate.baseline import BaselineFileError
from pytest_sglang_perf.gate.cell_ids import strip_variant
from pytest_sglang_perf.gate.compare import Cell
from pytest_sglang_perf.gate.conditions import DisturbedRecording
from pytest_sglang_perf.gate.failing import conditions_lines, gate_failure, refresh_command
from pytest_sglang_perf.gate.terminal import failure_message
from pytest_sglang_perf.measurement.concurrency import MAX, MAX_STREAMS, Level, Slo, parse_levels
from pytest_sglang_perf.measurement.prefix_cache import WARM, PrefixCache, prefix_cache_mode, warm_cache_note
from pytest_sglang_perf.measurement.request import RequestParams
from pytest_sglang_perf.measurement.result import Result, Sweep
from pytest_sglang_perf.report.servers import server_failure_lines
from pytest_sglang_perf.session.facade import PerfSession, VariantUnavailable
from pytest_sglang_perf.session.variant_run import VariantRun

if TYPE_CHECKING:
    import openai

    from pytest_sglang_perf.measurement.client import StreamRecord


SloSpec = Mapping[str, str | float]
"""`{"ttft": "200ms", "tpot": "50ms"}`: latency objectives (numbers are seconds)."""

_EXIT_WAIT = 0.5
"""Seconds a failed request waits for a dying server process to finish exiting, to say how it ended."""


class SGLangPerf:
    """What a test gets from the `sglang_perf` fixture: one variant's running server."""

    def __init__(self, session: PerfSession, run: VariantRun, request: pytest.FixtureRequest, nodeid: str) -> None:
        assert run.server is not None, "a variant's handle needs its running server"
        self._session = session
        self._run = run
        self.variant = run.variant
        self.server = run.server
        self._request = request
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

    @overload
    def measure(self, prompt: str | None = None, *, max_tokens: int | None = None, temperature: float | None = None,
                repeats: int | Literal["auto"] | None = None, warmup: int | None = None, seed: int | None = None,
                ignore_eos: bool | None = None, prefix_cache: PrefixCache | None = None,
                concurrency: Level = 1, slo: SloSpec | None = None, prompt_tokens: int | None = None) -> Result: ...

    @overload
    def measure(self, prompt: str | None = None, *, max_tokens: int | None = None, temperature: float | None = None,
                repeats: int | Literal["auto"] | None = None, warmup: int | None = None, seed: int | None = None,
                ignore_eos: bool | None = None, prefix_cache: PrefixCache | None = None,
                concurrency: list[Level] | tuple[Level, ...], slo: SloSpec | None = None,
                prompt_tokens: int | None = None) -> Sweep: ...

    def measure(self, prompt: str | None = None, *, max_tokens: int | None = None, temperature: float | None = None,
                repeats: int | Literal["auto"] | None = None, warmup: int | None = None, seed: int | None = None,
                ignore_eos: bool | None = None, prefix_cache: PrefixCache | None = None,
                concurrency: Level | list[Level] | tuple[Level, ...] = 1,
                slo: SloSpec | None = None, prompt_tokens: int | None = None) -> Result | Sweep:
        """Send `prompt` as streamed chat requests (warmup, then repeats) and return samples and summaries.

        `repeats="auto"` (or `request.repeats = "auto"`): the adaptive plan, which keeps measuring until this
        test's verdict is decided at the configured confidence, up to `request.max_repeats` requests.
        `prefix_cache="cold"` (the default, `request.prefix_cache`): SGLang's prefix cache is emptied before every
        request, so each prefills its whole prompt; `"warm"`: no flush, the warmup fills the cache and the
        measured requests are cache hits.
        `concurrency=N` (or `"max"`, the server's request cap): rounds of N streams sent at once (`repeats` and
        `warmup` count rounds), a cell of its own; a list of levels is a sweep and returns a `Sweep`, one Result
        per level. `slo={"ttft": "200ms", "tpot": "50ms"}` (or `request.slo`) adds goodput. docs/concurrency.md.
        `prompt_tokens=N`: a prompt of exactly N tokens by this server's own count (the chat template's included):
        `prompt` (or, without one, prompts.LONG_PROMPT_HEAD) followed by as much of prompts.py's weather log as it
        takes; N is part of the cell's identity, and each request's usage must say N. One stream only.
        docs/prefill.md.
        """
        __tracebackhide__ = True
        prompt = self._prompt(prompt, prompt_tokens, concurrency)
        given = {"max_tokens": max_tokens, "temperature": temperature, "repeats": repeats, "warmup": warmup,
                 "seed": seed, "ignore_eos": ignore_eos, "slo": self._slo(slo), "prompt_tokens": prompt_tokens,
                 "prefix_cache": None if prefix_cache is None else _prefix_cache(prefix_cache)}
        if isinstance(concurrency, list | tuple):
            # every level resolved ("max" included) before the first request: a bad level costs no measurement
            plan = [self._params(prompt, given, level) for level in self._levels(concurrency)]
            return Sweep(tuple(self._measure(params) for params in plan))
        return self._measure(self._params(prompt, given, self._levels(concurrency)[0]))

    def _prompt(self, prompt: str | None, tokens: int | None, concurrency: object) -> str:
        """The prompt sent: the test's own, or the one of exactly `tokens` tokens built on this server."""
        __tracebackhide__ = True
        if tokens is None:
            if prompt is None:
                raise TypeError("measure() needs a prompt, or prompt_tokens=N for a prompt of exactly N tokens")
            return prompt
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
            raise ValueError(f"measure(prompt_tokens=...): expected a whole number of tokens >= 1, got {tokens!r}")
        if concurrency != 1:
            raise ValueError("measure(prompt_tokens=...) measures one stream: each stream of a concurrent round opens "
                             "with a label of its own, which changes its length; drop concurrency= or prompt_tokens=")
        from pytest_sglang_perf.measurement.client import RequestFailed

        try:
            return self._session.exact_prompt(self.variant.name, tokens, prompt)
        except RequestFailed as exc:
            failure = self._request_failure(exc)
        pytest.fail(failure, pytrace=False)

    def _levels(self, value: object) -> tuple[Level, ...]:
        try:
            return parse_levels(value)
        except ValueError as exc:
            raise ValueError(f"measure(concurrency=...): {exc}") from None

    def _slo(self, value: SloSpec | None) -> Slo | None:
        if value is None:
            return self._session.settings.request.slo
        try:
            return parse_slo(value)
        except ValueError as exc:
            raise ValueError(f"measure(slo=...): {exc}") from None

    def _streams(self, level: Level) -> int:
        """The streams of one round at `level` ("max": the server's request cap, read once it runs)."""
        if level != MAX:
            return int(level)
        from pytest_sglang_perf.server.capacity import max_streams

        info = self._run.config.info if self._run.config is not None else {}
        try:
            return max_streams(self.variant.name, info, self._run.startup, MAX_STREAMS)
        except ValueError as exc:
            pytest.fail(str(exc), pytrace=False)

    def _decider(self, params: RequestParams) -> Callable[[Result], bool] | None:
        """The adaptive plan's stopping rule for this test's cell; None for a fixed plan."""
        if params.max_repeats is None:
            return None
        return self._session.decider(self.test_id + params.cell_suffix, self.variant.name, params)

    def _measure(self, params: RequestParams) -> Result:
        __tracebackhide__ = True
        from pytest_sglang_perf.measurement.client import RequestFailed

        try:
            result = self._session.measure(self.variant.name, params, self._decider(params))
        except RequestFailed as exc:
            failure = self._request_failure(exc)
        else:
            self._warn_if_cold(result)
            return result
        pytest.fail(failure, pytrace=False)  # outside the except block: no "During handling of ..." chain

    def _request_failure(self, exc: Exception) -> str:
        return f"[{self.variant.name}] request failed: {exc}{self._server_gone()}\nserver log: {self.server.log_path}"

    def _warn_if_cold(self, result: Result | None) -> None:
        """A measurement that asked for a warm prefix cache and hit none of it carries the warning."""
        note = warm_cache_note(result.samples) if result is not None and result.params.prefix_cache == WARM else None
        if note is not None:
            warnings.warn(SGLangPrefixCacheWarning(f"[{self.variant.name}] {note}"), stacklevel=4)

    def cross_check(self, prompt: str, *, max_tokens: int | None = None, temperature: float | None = None,
                    seed: int | None = None) -> StreamRecord:
        """Send the request `measure()` would send through the `openai` package instead (one request).

        For functional checks that the two clients agree (tokens, text, speculative statistics); its timings
        carry the `openai` package's overhead, so never gate on them.
        """
        __tracebackhide__ = True
        from pytest_sglang_perf.measurement.client import RequestFailed
        from pytest_sglang_perf.measurement.measure import chat_request
        from pytest_sglang_perf.measurement.openai_client import cross_check

        params = self._params(prompt, {"max_tokens": max_tokens, "temperature": temperature, "seed": seed,
                                       "repeats": 1, "warmup": 0})
        request = chat_request(self.model, params, self._session.settings.request.timeout)
        try:
            return cross_check(self.base_url, request, self.server.plan.api_key)
        except RequestFailed as exc:
            pytest.fail(f"[{self.variant.name}] request through openai failed: {exc}", pytrace=False)

    def _server_gone(self) -> str:
        """Says so when the server process has ended (the request failed because the server died)."""
        ended = self.server.exit_description(_EXIT_WAIT)
        return "" if ended is None else f"\nthe server process (pid {self.server.pid}) is gone: {ended}"

    def _params(self, prompt: str, given: Mapping[str, object], level: Level = 1) -> RequestParams:
        """The request sent: the settings the test `given` (None: not given) over the `request` table's."""
        return self._session.settings.request.params(prompt, given, concurrency=self._streams(level), level=level)

    def check(self, result: Result | Sweep) -> None:
        """Gate `result` on this test's baseline (see docs/usage/verdicts.md): a regression is re-measured once (on a
        fresh boot or this server: `[gate] confirm`) and fails the test only if it holds. A Sweep gates each level as
        its own cell, every level whatever another's verdict, and fails the test with every level that regressed or
        whose recording was refused."""
        __tracebackhide__ = True
        failures = [failure for one in (result if isinstance(result, Sweep) else (result,))
                    if (failure := self._check_one(one)) is not None]
        if failures:
            pytest.fail("\n\n".join(failures), pytrace=False)

    def _check_one(self, result: Result) -> str | None:
        """Gate one result (its level's cell); the failure message, or None."""
        __tracebackhide__ = True
        if result.variant != self.variant.name:
            raise ValueError(f"result of variant {result.variant!r} checked in variant {self.variant.name!r}")
        from pytest_sglang_perf.measurement.client import RequestFailed

        test_id = self.test_id + result.params.cell_suffix
        try:
            record = self._session.check(test_id, result)
        except (BaselineFileError, DisturbedRecording, VariantUnavailable) as exc:
            return str(exc)  # failed by check(), outside this handler: one message, no chained traceback
        except RequestFailed as exc:  # the re-measure of a regression
            return self._request_failure(exc)
        self._warn_if_cold(record.confirmation)
        cell = record.cell
        self._publish(cell, result)
        options = self._session.options
        if gate_failure(cell, options) is None:
            return None
        context = server_failure_lines(self._run) + conditions_lines(result, record.confirmation)
        return failure_message(cell, refresh_command(self._nodeid, self.variant.name, options), context)

    def _publish(self, cell: Cell, result: Result) -> None:
        """The checked cell leaves the terminal too: JUnit properties (junit.xml) and a pytest-benchmark
        benchmark (its table, saved runs, comparisons and histograms)."""
        from pytest_sglang_perf.outputs.junit import cell_properties
        from pytest_sglang_perf.pytest_plugin.benchmark_bridge import feed

        for name, value in cell_properties(cell, cached_tokens=result.cached_tokens, roofline=result.roofline,
                                           level=result.params.cell_suffix):
            self._request.node.user_properties.append((name, value))
        feed(self._request, cell, result)

    @property
    def test_id(self) -> str:
        """The node id without the variant's parameter: the key of this test's baselines."""
        return strip_variant(self._nodeid, self.variant.name)


def _prefix_cache(value: object) -> PrefixCache:
    try:
        return prefix_cache_mode(value)
    except ValueError as exc:
        raise ValueError(f"measure(prefix_cache=...): {exc}") from None

