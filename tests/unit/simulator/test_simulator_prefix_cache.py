"""The simulator's radix (prefix) cache: what a prompt finds cached, how /flush_cache empties it, and how the chat
stream, /generate, the `Prefill batch` line and the prefill time report it (docs/sglang-0.5.23.md §3.5)."""

from __future__ import annotations

import asyncio
import io
import re
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient
from sim_setup import LLAMA_1B
from sim_setup import engine as make_engine
from test_simulator_app import _run

from pytest_sglang_perf.sglang_facts.flags import DEFAULT_TABLE
from pytest_sglang_perf.simulator.args.knobs import Knobs
from pytest_sglang_perf.simulator.engine.content import estimate_prompt_tokens, prompt_token_ids, text_token_ids
from pytest_sglang_perf.simulator.engine.engine import SimEngine
from pytest_sglang_perf.simulator.engine.radix import MAX_ENTRIES, RadixCache, shared_prefix
from pytest_sglang_perf.simulator.logs import SimLogger

needs_flags = pytest.mark.skipif(not DEFAULT_TABLE.exists(), reason="the real SGLang flag table is not generated yet")
FAST = Knobs(decode_tok_s=100_000, ttft=0.0, boot_seconds=0.0)
JSON = {"Content-Type": "application/json"}
PROMPT = "Write a red-black tree in C with insert and delete, and explain each rotation you use."
Client = TestClient[Any, Any]


# ---- the cache itself ------------------------------------------------------------------------------------------


def test_a_served_prompt_is_cached_but_its_last_token_is_recomputed() -> None:
    cache = RadixCache()
    prompt = tuple(range(64))
    assert cache.match(prompt) == 0
    cache.insert(prompt)
    assert cache.match(prompt) == 63
    assert cache.match((*prompt, 99, 100)) == 64  # a longer prompt reads all of the cached one
    assert cache.match((*prompt[:10], 7, 7, 7)) == 10  # a prompt sharing a beginning reads that beginning
    assert cache.cached_tokens == 64


def test_flush_disable_and_pages() -> None:
    cache = RadixCache()
    cache.insert(tuple(range(64)))
    cache.reset()
    assert cache.match(tuple(range(64))) == 0 and cache.cached_tokens == 0
    off = RadixCache(enabled=False)
    off.insert(tuple(range(64)))
    assert off.match(tuple(range(64))) == 0
    paged = RadixCache(page_size=16)
    paged.insert(tuple(range(64)))
    assert paged.match(tuple(range(64))) == 48  # 63 tokens, in whole pages of 16
    assert paged.match((*range(20), 5)) == 16


def test_the_least_recently_used_prompt_is_evicted_first() -> None:
    cache = RadixCache(capacity=100)
    first, second, third = (tuple(range(k * 1000, k * 1000 + 40)) for k in range(3))
    cache.insert(first)
    cache.insert(second)
    assert cache.match(first) == 39  # first is now the most recently used
    cache.insert(third)  # 120 tokens > 100: second goes
    assert (cache.match(first), cache.match(second), cache.match(third)) == (39, 0, 39)
    many = RadixCache()
    for k in range(MAX_ENTRIES + 1):
        many.insert((k, k + 1))
    assert many.match((0, 1, 2)) == 0 and many.match((1, 2, 3)) == 2


def test_shared_prefix() -> None:
    assert shared_prefix((1, 2, 3), (1, 2, 4)) == 2
    assert shared_prefix((), (1,)) == 0
    assert shared_prefix((1, 2), (1, 2, 3)) == 2


def test_chat_prompt_ids_count_like_the_estimate_and_share_the_template() -> None:
    one = [{"role": "user", "content": PROMPT}]
    other = [{"role": "user", "content": "A different question entirely."}]
    assert len(prompt_token_ids(one)) == estimate_prompt_tokens(one)
    assert len(prompt_token_ids(other)) == estimate_prompt_tokens(other)
    assert shared_prefix(prompt_token_ids(one), prompt_token_ids(other)) == 3 + 4  # template + the role's header
    longer = [{"role": "user", "content": PROMPT + " Then add a search."}]
    assert shared_prefix(prompt_token_ids(one), prompt_token_ids(longer)) == len(prompt_token_ids(one))
    assert len(text_token_ids("abcdefghi")) == 2 and text_token_ids("abc") == ()


# ---- through the HTTP API -------------------------------------------------------------------------------------


def _engine(*flags: str, knobs: Knobs = FAST) -> tuple[SimEngine, io.StringIO]:
    stream = io.StringIO()
    return make_engine(LLAMA_1B, *flags, knobs=knobs, log=SimLogger(stream=stream, access_stream=io.StringIO())), stream


def _chat(**fields: Any) -> bytes:
    return orjson.dumps({"model": "m", "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 4,
                         "ignore_eos": True, **fields})


async def _stream(client: Client, *, per_chunk_usage: bool = False) -> list[dict[str, Any]]:
    options = {"include_usage": True, "continuous_usage_stats": per_chunk_usage}
    body = _chat(stream=True, stream_options=options, return_cached_tokens_details=True)
    raw = await (await client.post("/v1/chat/completions", data=body, headers=JSON)).read()
    events = [part[6:] for part in raw.split(b"\n\n") if part.startswith(b"data: ")]
    assert events[-1] == b"[DONE]"
    return [orjson.loads(event) for event in events[:-1]]


def _closing(events: list[dict[str, Any]]) -> tuple[Any, Any]:
    """(sglext of the `choices: []` sglext chunk or None, the usage chunk's usage)."""
    sglext = next((e["sglext"] for e in events if "sglext" in e), None)
    return sglext, events[-1]["usage"]


PROMPT_TOKENS = estimate_prompt_tokens([{"role": "user", "content": PROMPT}])


@needs_flags
def test_a_repeated_chat_prompt_hits_the_cache_until_flushed() -> None:
    engine, log = _engine()

    async def scenario(client: Client) -> None:
        first, second = await _stream(client), await _stream(client)
        assert _closing(first)[0] is None  # no hit: no cached_tokens_details, and nothing else asked: no sglext
        sglext, usage = _closing(second)
        assert sglext == {"cached_tokens_details": {"device": PROMPT_TOKENS - 1, "host": 0}}
        assert usage["prompt_tokens"] == PROMPT_TOKENS and usage["prompt_tokens_details"] is None
        assert (await client.post("/flush_cache")).status == 200
        assert _closing(await _stream(client))[0] is None

    _run(engine, scenario)
    lines = re.findall(r"Prefill batch, #new-seq: 1, #new-token: (\d+), #cached-token: (\d+),", log.getvalue())
    assert lines == [(str(PROMPT_TOKENS), "0"), ("1", str(PROMPT_TOKENS - 1)), (str(PROMPT_TOKENS), "0")]
    assert "Cache flushed successfully!" in log.getvalue()


@needs_flags
def test_enable_cache_report_puts_the_count_in_usage_and_non_streamed_answers() -> None:
    engine, _ = _engine("--enable-cache-report")

    async def scenario(client: Client) -> None:
        assert _closing(await _stream(client))[1]["prompt_tokens_details"] == {"cached_tokens": 0}
        events = await _stream(client, per_chunk_usage=True)
        hit = {"cached_tokens": PROMPT_TOKENS - 1}
        assert _closing(events)[1]["prompt_tokens_details"] == hit
        content = [e for e in events if e["choices"] and e["choices"][0]["delta"].get("content")]
        assert content and all(e["usage"]["prompt_tokens_details"] == hit for e in content)
        plain = await (await client.post("/v1/chat/completions", data=_chat(return_cached_tokens_details=True),
                                         headers=JSON)).json()
        assert plain["usage"]["prompt_tokens_details"] == {"cached_tokens": PROMPT_TOKENS - 1}
        assert plain["sglext"] == {"cached_tokens_details": {"device": PROMPT_TOKENS - 1, "host": 0}}
        unasked = await (await client.post("/v1/chat/completions", data=_chat(), headers=JSON)).json()
        assert "sglext" not in unasked

    _run(engine, scenario)


@needs_flags
def test_generate_meta_info_reports_cached_tokens() -> None:
    engine, _ = _engine()

    async def scenario(client: Client) -> None:
        body = orjson.dumps({"text": PROMPT, "sampling_params": {"max_new_tokens": 3}})
        infos = [(await (await client.post("/generate", data=body, headers=JSON)).json())["meta_info"]
                 for _ in range(2)]
        assert (infos[0]["cached_tokens"], infos[0]["cached_tokens_details"]) == (0, None)
        cached = infos[1]["prompt_tokens"] - 1
        assert (infos[1]["cached_tokens"], infos[1]["cached_tokens_details"]) == (cached, {"device": cached,
                                                                                            "host": 0})

    _run(engine, scenario)


@needs_flags
def test_disable_radix_cache_never_hits() -> None:
    engine, log = _engine("--disable-radix-cache")

    async def scenario(client: Client) -> None:
        for _ in range(2):
            assert _closing(await _stream(client))[0] is None

    _run(engine, scenario)
    assert log.getvalue().count(f"#new-token: {PROMPT_TOKENS}, #cached-token: 0,") == 2


@needs_flags
def test_a_second_flush_while_one_waits_is_refused_like_sglang() -> None:
    engine, _ = _engine(knobs=Knobs(decode_tok_s=1000, ttft=0.0, boot_seconds=0.0))

    async def scenario(client: Client) -> None:
        busy = asyncio.ensure_future(client.post("/v1/chat/completions", data=_chat(max_tokens=1000), headers=JSON))
        await asyncio.sleep(0.05)
        waiting = asyncio.ensure_future(client.post("/flush_cache", params={"timeout": "30"}))
        await asyncio.sleep(0.05)
        second = await client.post("/flush_cache", params={"timeout": "30"})
        assert (second.status, await second.text()) == (400, "Another flush_cache is already in progress.")
        assert (await waiting).status == 200 and (await busy).status == 200

    _run(engine, scenario)


@needs_flags
def test_prefill_time_charges_only_the_new_tokens() -> None:
    engine, _ = _engine(knobs=Knobs(decode_tok_s=1000, ttft=0.64, boot_seconds=0.0))
    assert engine.pacing.prefill(64) == pytest.approx(0.64 * engine.pacing.time_scale)
    assert engine.pacing.prefill(1, cached_tokens=63) == pytest.approx(0.01 * engine.pacing.time_scale)
    pacing = _engine(knobs=Knobs(boot_seconds=0.0))[0].pacing  # the roofline model
    assert pacing.prefill(1, cached_tokens=4000) == pytest.approx(pacing.prefill(1))
    assert pacing.prefill(1, cached_tokens=4000) < pacing.prefill(4001) / 2
