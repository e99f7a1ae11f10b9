"""The simulator's prefill: `/v1/tokenize` counts as the chat endpoint does, a long prompt is prefilled in chunks of
`chunked_prefill_size` (one `Prefill batch` line each), the attention term grows
quadratically with the prompt, and the prefill graph removes launch cost that matters at short prompts only
(docs/prefill.md §3, §5)."""

from __future__ import annotations

import asyncio
import io
import re
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient
from sim_setup import LLAMA_1B, costs
from sim_setup import engine as make_engine
from test_simulator_app import _run

from pytest_sglang_perf.prompts import long_prompt
from pytest_sglang_perf.simulator.args.knobs import Knobs
from pytest_sglang_perf.simulator.engine.engine import SimEngine
from pytest_sglang_perf.simulator.logs import SimLogger

JSON = {"Content-Type": "application/json"}
Client = TestClient[Any, Any]
LLAMA_8B = {**LLAMA_1B, "hidden_size": 4096, "num_hidden_layers": 32, "intermediate_size": 14336}
_PREFILL = re.compile(r"Prefill batch, #new-seq: (\d+), #new-token: (\d+), #cached-token: (\d+),")


def _engine(*flags: str) -> tuple[SimEngine, io.StringIO]:
    stream = io.StringIO()
    knobs = Knobs(decode_tok_s=100_000, boot_seconds=0.0, noise=0.0)
    return make_engine(LLAMA_1B, *flags, knobs=knobs, log=SimLogger(stream=stream, access_stream=io.StringIO())), stream


async def _usage(client: Client, prompt: str) -> int:
    """The streamed chat request's usage.prompt_tokens."""
    body = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": prompt}], "max_tokens": 2,
                         "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}})
    response = await client.post("/v1/chat/completions", data=body, headers=JSON)
    usage = 0
    async for line in response.content:
        if line.startswith(b"data: {") and b'"usage":{' in line:
            usage = orjson.loads(line[6:])["usage"]["prompt_tokens"]
    return usage


def test_tokenize_counts_a_chat_prompt_as_the_chat_endpoint_does() -> None:
    engine, _ = _engine()
    prompt = long_prompt(300)

    async def scenario(client: Client) -> None:
        for path in ("/v1/tokenize", "/tokenize"):
            answer = await (await client.post(path, data=orjson.dumps(
                {"model": "m", "messages": [{"role": "user", "content": prompt}]}), headers=JSON)).json()
            assert answer["count"] == len(answer["tokens"])
            assert answer["max_model_len"] == LLAMA_1B["max_position_embeddings"]
            assert answer["count"] == await _usage(client, prompt)
        texts = await (await client.post("/v1/tokenize", data=orjson.dumps({"prompt": ["abcdefgh", "abcd"]}),
                                         headers=JSON)).json()
        assert texts["count"] == [3, 2]  # a BOS id, then one per 4 bytes
        bad = await client.post("/v1/tokenize", data=orjson.dumps({"prompt": 7}), headers=JSON)
        assert bad.status == 400 and "Expected str or List[str]" in (await bad.json())["message"]

    _run(engine, scenario)


def test_a_long_prompt_is_prefilled_in_chunks_of_the_chunked_prefill_size() -> None:
    engine, log = _engine("--chunked-prefill-size", "256")
    counted: list[int] = []

    async def scenario(client: Client) -> None:
        counted.append(await _usage(client, long_prompt(500)))

    _run(engine, scenario)
    chunks = [(int(seqs), int(new), int(cached)) for seqs, new, cached in _PREFILL.findall(log.getvalue())]
    whole = counted[0]
    assert whole > 512
    assert [new for _, new, _ in chunks] == [256] * (whole // 256) + ([whole % 256] if whole % 256 else [])
    assert all(seqs == 1 and cached == 0 for seqs, _, cached in chunks)


def test_the_attention_term_is_quadratic_and_chunking_does_not_change_the_flops() -> None:
    step = costs(LLAMA_8B, gpu="H200")
    assert step.attention_flops(2048) == pytest.approx(4 * step.attention_flops(1024))
    whole = step.attention_flops(8192)
    chunked = sum(step.attention_flops(2048, prefix) for prefix in range(0, 8192, 2048))
    assert chunked == pytest.approx(whole)
    # 32 layers x 4096 wide: 2 x N^2 x width x layers
    assert whole == pytest.approx(2 * 8192**2 * 4096 * 32)


def test_the_prefill_graph_shortens_a_short_prefill_and_hardly_a_long_one() -> None:
    graph = costs(LLAMA_8B, "--cuda-graph-backend-prefill", "breakable", gpu="H200")
    eager = costs(LLAMA_8B, "--cuda-graph-backend-prefill", "disabled", gpu="H200")
    assert graph.uses_prefill_graph(512) and not eager.uses_prefill_graph(512)

    def gain(tokens: int) -> float:
        return eager.prefill(tokens, eager.attention_flops(tokens)) / graph.prefill(tokens,
                                                                                    graph.attention_flops(tokens)) - 1

    assert gain(512) > 0.05
    assert 0 < gain(8192) < 0.01
    assert graph.prefill(8192, graph.attention_flops(8192)) > 10 * graph.prefill(512, graph.attention_flops(512))


def _drive(engine: SimEngine, prompts: list[int]) -> list[float]:
    """Submit one request per prompt length at once (distinct token ids) and wait for each one's first token: the
    loop seconds from submission to each."""
    async def main() -> list[float]:
        engine.start()
        try:
            loop = asyncio.get_running_loop()
            start = loop.time()
            tickets = [engine.batcher.submit((1, 1), tokens, prompt_ids=tuple(range(k * 10**6, k * 10**6 + tokens)))
                       for k, tokens in enumerate(prompts)]
            firsts = []
            for ticket in tickets:
                while ticket.done_steps == 0:
                    await ticket.progressed()
                firsts.append(ticket.step_times[0] - start)
            return firsts
        finally:
            await engine.stop()

    return asyncio.run(main())


def test_sim_ttft_prices_a_chunked_prompt_once() -> None:
    stream = io.StringIO()
    knobs = Knobs(decode_tok_s=100_000, ttft=0.1, boot_seconds=0.0, noise=0.0)
    engine = make_engine(LLAMA_1B, "--chunked-prefill-size", "256", knobs=knobs,
                         log=SimLogger(stream=stream, access_stream=io.StringIO()))
    [first] = _drive(engine, [1024])
    assert first == pytest.approx(0.1 * engine.pacing.time_scale, rel=0.2)  # 4 chunks, one TTFT in all
    assert len(_PREFILL.findall(stream.getvalue())) == 4


def test_a_request_arriving_with_a_chunked_one_fills_the_last_chunks_budget() -> None:
    engine, log = _engine("--chunked-prefill-size", "256")
    firsts = _drive(engine, [600, 100])
    lines = [(int(seqs), int(new)) for seqs, new, _ in _PREFILL.findall(log.getvalue())]
    assert lines == [(1, 256), (1, 256), (2, 88 + 100)]
    assert firsts[0] == pytest.approx(firsts[1])  # both answer after the step that finished them
