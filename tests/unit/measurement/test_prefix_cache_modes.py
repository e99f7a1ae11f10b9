"""Cold and warm prefix cache on the plugin's side: reading SGLang's cached-token reports, flushing before each
request, the cold/warm checks, the config key, and the mode in a cell's identity and in stored samples."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sglang_stub import StubServer

from pytest_sglang_perf.config.settings import ConfigError, parse_settings
from pytest_sglang_perf.gate.identity import CellIdentity, ServerIdentity, differences
from pytest_sglang_perf.measurement.cache_flush import CacheFlush, CacheFlushFailed
from pytest_sglang_perf.measurement.client import ChatRequest, RequestFailed, StreamAccumulator
from pytest_sglang_perf.measurement.measure import measure, prompt_hash
from pytest_sglang_perf.measurement.prefix_cache import cold_cache_problem, warm_cache_note
from pytest_sglang_perf.measurement.request import RequestParams, RequestSettings
from pytest_sglang_perf.measurement.rounds import run_requests
from pytest_sglang_perf.measurement.samples import Sample

REQUEST = ChatRequest(model="m", prompt="p", max_tokens=3, temperature=0.0, seed=0)
PARAMS = RequestParams(prompt="Write a red-black tree.", max_tokens=10, temperature=0.6, seed=3, repeats=3, warmup=1)
STUB_REQUEST = dataclasses.replace(REQUEST, max_tokens=10)
"""What the stub streams by default: 10 tokens."""
HEAD = {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m"}
USAGE = {"prompt_tokens": 64, "total_tokens": 67, "completion_tokens": 3, "reasoning_tokens": 0,
         "completion_tokens_details": None}


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer() as server:
        yield server


def _sample(cached: int | None, prompt: int = 64) -> Sample:
    return Sample(ttft=0.1, e2e=0.5, decode_time=0.4, completion_tokens=3, prompt_tokens=prompt, chunks=3,
                  cached_tokens=cached)


def _record(*chunks: dict[str, Any], request: ChatRequest = REQUEST) -> Sample:
    """A stream of SGLang chunks (content, then the given `choices: []` chunks) fed as the client reads them."""
    acc = StreamAccumulator()
    for token in range(3):
        acc.feed_object({**HEAD, "choices": [{"index": 0, "delta": {"content": f" t{token}"}}]}, 0.1 * (token + 1))
    for chunk in chunks:
        acc.feed_object({**HEAD, "choices": [], **chunk}, 0.4)
    acc.done = True
    return acc.record(request).sample


# ---- reading the count -----------------------------------------------------------------------------------------


def test_sglext_cached_tokens_details_sums_every_tier() -> None:
    details = {"device": 40, "host": 16, "storage": 7, "storage_backend": "MooncakeStore"}
    sample = _record({"usage": None, "sglext": {"cached_tokens_details": details}}, {"usage": USAGE})
    assert sample.cached_tokens == 63


def test_no_cached_details_means_no_hit_when_asked_and_unknown_when_not() -> None:
    assert _record({"usage": USAGE}).cached_tokens == 0  # SGLang sends the field only after a hit
    unasked = dataclasses.replace(REQUEST, cache_details=False)
    assert _record({"usage": USAGE}, request=unasked).cached_tokens is None


def test_enable_cache_report_usage_gives_the_count_even_unasked() -> None:
    usage = {**USAGE, "prompt_tokens_details": {"cached_tokens": 63}}
    unasked = dataclasses.replace(REQUEST, cache_details=False)
    assert _record({"usage": usage}, request=unasked).cached_tokens == 63
    cold = {**USAGE, "prompt_tokens_details": {"cached_tokens": 0}}
    assert _record({"usage": cold}, request=unasked).cached_tokens == 0


def test_both_reports_and_spec_details_in_one_sglext_chunk() -> None:
    spec = {"spec_verify_ct": 2, "spec_accept_length": 1.5}
    sglext = {"cached_tokens_details": {"device": 63, "host": 0}, "spec_tokens_details": spec}
    usage = {**USAGE, "prompt_tokens_details": {"cached_tokens": 63}}
    sample = _record({"usage": None, "sglext": sglext}, {"usage": usage})
    assert (sample.cached_tokens, sample.spec_verify_ct, sample.spec_accept_length) == (63, 2, 1.5)


def test_multimodal_prompt_details_without_cached_key_do_not_hide_the_sglext_count() -> None:
    usage = {**USAGE, "prompt_tokens_details": {"cached_tokens": 0, "image_tokens": 20}}  # no --enable-cache-report
    sample = _record({"usage": None, "sglext": {"cached_tokens_details": {"device": 30, "host": 0}}}, {"usage": usage})
    assert sample.cached_tokens == 30


def test_the_request_asks_for_cached_tokens_details() -> None:
    assert REQUEST.body()["return_cached_tokens_details"] is True
    assert "return_cached_tokens_details" not in dataclasses.replace(REQUEST, cache_details=False).body()


def test_samples_keep_the_count_through_files() -> None:
    sample = _sample(63)
    assert sample.to_dict()["cached_tokens"] == 63
    assert Sample.from_dict(json.loads(json.dumps(sample.to_dict()))) == sample
    old = {key: value for key, value in sample.to_dict().items() if key != "cached_tokens"}
    assert Sample.from_dict(old).cached_tokens is None
    assert "cached_tokens" not in _sample(None).to_dict()


# ---- flushing --------------------------------------------------------------------------------------------------


def test_a_flush_precedes_every_request_the_warmup_too(stub: StubServer) -> None:
    records = run_requests(stub.url, STUB_REQUEST, count=2, warmup=1, api_key="k", flush=CacheFlush())
    assert len(records) == 2
    flush = "/flush_cache?timeout=30"
    assert stub.calls == [flush, "/v1/chat/completions"] * 3


def test_no_flush_without_it_and_the_admin_key_for_it(stub: StubServer) -> None:
    run_requests(stub.url, STUB_REQUEST, count=2, warmup=1)
    assert stub.calls == ["/v1/chat/completions"] * 3
    stub.script.api_key = "sk-admin"
    with pytest.raises(CacheFlushFailed, match="answered HTTP 401"):
        run_requests(stub.url, STUB_REQUEST, count=1, warmup=0, api_key="sk-user", flush=CacheFlush())
    with pytest.raises(RequestFailed, match="HTTP 401"):  # the flush passed with the admin key: the chat did not
        run_requests(stub.url, STUB_REQUEST, count=1, warmup=0, api_key="sk-user", flush=CacheFlush("sk-admin"))
    assert stub.calls[-2:] == ["/flush_cache?timeout=30", "/v1/chat/completions"]


def test_a_refused_flush_names_the_server_and_sglangs_message(stub: StubServer) -> None:
    stub.script.flush_status, stub.script.flush_text = 400, "Timed out waiting for idle state."
    with pytest.raises(CacheFlushFailed) as info:
        run_requests(stub.url, STUB_REQUEST, count=1, warmup=0, flush=CacheFlush())
    message = str(info.value)
    assert message.startswith(f'cannot empty the prefix cache (prefix_cache "cold") of the server at {stub.url}: '
                              f"POST {stub.url}/flush_cache?timeout=30 answered HTTP 400: Timed out waiting for "
                              "idle state. (SGLang flushes only when no request is running or waiting")
    assert stub.calls == ["/flush_cache?timeout=30"]  # nothing measured after a failed flush


def test_a_server_without_flush_cache_says_how_to_measure_anyway(stub: StubServer) -> None:
    stub.script.flush_status, stub.script.flush_text = 404, "Not Found"
    with pytest.raises(CacheFlushFailed, match=r'HTTP 404: Not Found \(.*set prefix_cache = "warm"'):
        run_requests(stub.url, STUB_REQUEST, count=1, warmup=0, flush=CacheFlush())


# ---- measure(): cold and warm ----------------------------------------------------------------------------------


def _measure(stub: StubServer, params: RequestParams = PARAMS) -> Any:
    return measure(stub.url, model="stub-model", variant="default", params=params, boot_seconds=1.0,
                   simulated=True)


def test_cold_measure_flushes_and_records_zero_cached(stub: StubServer) -> None:
    result = _measure(stub)
    assert [s.cached_tokens for s in result.samples] == [0, 0, 0]
    assert stub.calls.count("/flush_cache?timeout=30") == 4 and result.params.prefix_cache == "cold"


def test_a_cold_request_that_hit_the_cache_fails_naming_it(stub: StubServer) -> None:
    stub.script.cached_tokens = {"device": 8, "host": 0}
    with pytest.raises(RequestFailed, match=r'^measured request 1: 8 of 9 prompt tokens came from the prefix cache '
                                            r'although prefix_cache is "cold"'):
        _measure(stub)


def test_warm_measure_sends_no_flush_and_records_the_hits(stub: StubServer) -> None:
    stub.script.cached_tokens, stub.script.cache_report = {"device": 8, "host": 0}, True
    result = _measure(stub, dataclasses.replace(PARAMS, prefix_cache="warm"))
    assert "/flush_cache?timeout=30" not in stub.calls
    assert [s.cached_tokens for s in result.samples] == [8, 8, 8]


def test_the_checks_of_each_mode() -> None:
    assert cold_cache_problem([_sample(0), _sample(0)]) is None
    problem = cold_cache_problem([_sample(0), _sample(63)], first_number=4)
    assert problem is not None and problem.startswith("measured request 5: 63 of 64 prompt tokens came from the "
                                                      'prefix cache although prefix_cache is "cold"')
    assert warm_cache_note([_sample(63), _sample(0)]) is None
    note = warm_cache_note([_sample(0), _sample(0)])
    assert note is not None and "none of the 2 measured requests hit the prefix cache" in note


def test_a_warm_measurement_hashes_apart_and_a_cold_one_as_before() -> None:
    assert prompt_hash(PARAMS) == prompt_hash(dataclasses.replace(PARAMS, prefix_cache="cold"))
    assert prompt_hash(dataclasses.replace(PARAMS, prefix_cache="warm")) != prompt_hash(PARAMS)


# ---- configuration and identity --------------------------------------------------------------------------------


def test_request_prefix_cache_key() -> None:
    def parse(request: dict[str, object]) -> Any:
        return parse_settings({"model": "m", "request": request}, source="pyproject.toml", root=Path("/p")).request

    assert parse({}).prefix_cache == "cold"
    assert parse({"prefix_cache": "warm"}).prefix_cache == "warm"
    with pytest.raises(ConfigError) as info:
        parse({"prefix_cache": "hot"})
    assert str(info.value).startswith('pyproject.toml: request.prefix_cache: expected "cold" (default: every request '
                                      "prefills its whole prompt) or \"warm\"")
    assert str(info.value).endswith("got 'hot'")


SERVER = ServerIdentity(model="m", model_config=None, gpus="cpu", args={})


def _identity(prefix_cache: str) -> CellIdentity:
    request = RequestSettings(max_tokens=512, temperature=0.6, seed=0, repeats=3, warmup=1, prefix_cache=prefix_cache)
    return CellIdentity.of("p1", request, SERVER)


def test_the_mode_is_part_of_a_cells_identity() -> None:
    cold, warm = _identity("cold"), _identity("warm")
    assert cold.to_dict()["prefix_cache"] == "cold"
    assert CellIdentity.from_dict(json.loads(json.dumps(warm.to_dict()))) == warm
    assert differences(cold, warm) == ["prefix_cache cold -> warm"]


def test_an_old_identity_without_the_mode_is_unknown_and_stale() -> None:
    old = {key: value for key, value in _identity("cold").to_dict().items() if key != "prefix_cache"}
    unknown = CellIdentity.from_dict(old)
    assert unknown.prefix_cache == "unknown"
    [change] = differences(unknown, _identity("cold"))
    assert change.startswith("prefix_cache unknown -> cold (recorded before the prefix cache was controlled")
    assert RequestSettings.from_dict({"max_tokens": 1, "temperature": 0, "seed": 0, "repeats": 1,
                                      "warmup": 1}).prefix_cache == "unknown"
