"""The HTTP app in-process (aiohttp test server on 127.0.0.1): readiness, auth, info, chat, native generate,
/flush_cache, /metrics, continuous batching and the request-time faults."""

from __future__ import annotations

import asyncio
import io
import itertools
import re
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import pytest
from aiohttp import ClientPayloadError
from aiohttp.test_utils import TestClient, TestServer
from sim_setup import engine as make_engine

from pytest_sglang_perf.sglang_facts.flags import DEFAULT_TABLE
from pytest_sglang_perf.simulator.api.app import build_app
from pytest_sglang_perf.simulator.args.knobs import Knobs
from pytest_sglang_perf.simulator.engine.engine import ServerStatus, SimEngine
from pytest_sglang_perf.simulator.engine.requests import PromptSpec
from pytest_sglang_perf.simulator.logs import SimLogger

pytestmark = pytest.mark.skipif(not DEFAULT_TABLE.exists(), reason="the real SGLang flag table is not generated yet")

MODEL = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 4096, "num_hidden_layers": 36,
         "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 12288,
         "vocab_size": 151936, "max_position_embeddings": 40960, "eos_token_id": 151645}
SPEC = ("--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4")
FAST = Knobs(decode_tok_s=100_000, ttft=0.0, accept_length=3.0, boot_seconds=0.0)
JSON = {"Content-Type": "application/json"}
Client = TestClient[Any, Any]


def _engine(*flags: str, knobs: Knobs = FAST, log: SimLogger | None = None) -> SimEngine:
    return make_engine(MODEL, *flags, knobs=knobs, log=log)


def _run(engine: SimEngine, scenario: Callable[[Client], Awaitable[None]], up: bool = True) -> None:
    async def main() -> None:
        engine.start()
        if up:
            engine.status = ServerStatus.UP
        try:
            async with TestClient(TestServer(build_app(engine), host="127.0.0.1")) as client:
                await scenario(client)
        finally:
            await engine.stop()

    asyncio.run(main())


def _chat(**fields: Any) -> bytes:
    return orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], **fields})


def _generate(**fields: Any) -> bytes:
    return orjson.dumps({"text": "The capital city of France is", **fields})


def _events(body: bytes) -> list[Any]:
    events = [part[6:] for part in body.split(b"\n\n") if part.startswith(b"data: ")]
    assert events[-1] == b"[DONE]"
    return [orjson.loads(event) for event in events[:-1]]


def test_health_is_503_until_ready() -> None:
    engine = _engine()

    async def scenario(client: Client) -> None:
        assert [(await client.get(p)).status for p in ("/health", "/health_generate", "/ready")] == [503] * 3
        assert (await client.get("/model_info")).status == 200  # info endpoints answer during warmup
        engine.status = ServerStatus.UP
        assert [(await client.get(p)).status for p in ("/health", "/health_generate", "/ready")] == [200] * 3
        engine.status = ServerStatus.EXITING
        assert (await client.get("/health")).status == 503

    _run(engine, scenario, up=False)


def test_api_key_guards_all_but_health_ready_and_metrics() -> None:
    """docs/sglang-0.5.23.md §2.2 (srt/utils/auth.py::decide_request_auth)."""

    async def scenario(client: Client) -> None:
        for path in ("/v1/models", "/server_info", "/flush_cache"):
            denied = await client.get(path)
            assert denied.status == 401 and await denied.json() == {"error": "Unauthorized"}, path
        denied = await client.post("/generate", data=_generate(), headers=JSON)
        assert denied.status == 401
        wrong = await client.get("/v1/models", headers={"Authorization": "Bearer sk-other"})
        assert wrong.status == 401
        for header in ("Bearer sk-test", "bearer sk-test"):
            assert (await client.get("/v1/models", headers={"Authorization": header})).status == 200
        assert [(await client.get(p)).status for p in ("/health", "/ready", "/metrics")] == [200, 200, 200]

    _run(_engine("--api-key", "sk-test", "--enable-metrics"), scenario)


def test_admin_key_guards_flush_cache() -> None:
    async def scenario(client: Client) -> None:
        assert (await client.post("/flush_cache", headers={"Authorization": "Bearer sk-user"})).status == 401
        assert (await client.post("/flush_cache", headers={"Authorization": "Bearer sk-admin"})).status == 200
        assert (await client.get("/v1/models", headers={"Authorization": "Bearer sk-user"})).status == 200

    _run(_engine("--api-key", "sk-user", "--admin-api-key", "sk-admin"), scenario)


def test_models_endpoints() -> None:
    async def scenario(client: Client) -> None:
        card = (await (await client.get("/v1/models")).json())["data"][0]
        assert card["id"] == "/models/m" and card["max_model_len"] == 40960
        assert (await client.get("/v1/models/%2Fmodels%2Fm")).status == 200
        missing = await client.get("/v1/models/other")
        assert missing.status == 404 and (await missing.json())["error"]["code"] == "model_not_found"

    _run(_engine(), scenario)


def test_spec_stream_chunks_match_verify_steps_and_feed_server_info() -> None:
    async def scenario(client: Client) -> None:
        body = _chat(max_tokens=400, ignore_eos=True, stream=True, return_spec_tokens_details=True,
                     stream_options={"include_usage": True})
        events = _events(await (await client.post("/v1/chat/completions", data=body, headers=JSON)).read())
        content = [e for e in events if e["choices"] and e["choices"][0]["delta"].get("content")]
        details = next(e["sglext"]["spec_tokens_details"] for e in events if "sglext" in e)
        assert events[-1]["usage"]["completion_tokens"] == 400
        assert len(content) == details["spec_verify_ct"] + 1
        state = (await (await client.get("/server_info")).json())["internal_states"][0]
        assert state["avg_spec_accept_length"] == pytest.approx(3.0, abs=0.6)
        assert state["last_gen_throughput"] > 0
        assert (await client.post("/flush_cache")).status == 200
        state = (await (await client.get("/server_info")).json())["internal_states"][0]
        assert "avg_spec_accept_length" not in state  # /flush_cache resets the speculative averages
        assert state["last_gen_throughput"] > 0  # this one keeps its value (docs/sglang-0.5.23.md §11.6)

    _run(_engine(*SPEC), scenario)


def test_flush_cache_refuses_while_busy_and_waits_with_a_timeout() -> None:
    knobs = Knobs(decode_tok_s=1000, ttft=0.0, boot_seconds=0.0)

    async def scenario(client: Client) -> None:
        body = _chat(max_tokens=200, ignore_eos=True)
        request = asyncio.ensure_future(client.post("/v1/chat/completions", data=body, headers=JSON))
        await asyncio.sleep(0.05)
        busy = await client.post("/flush_cache")
        assert (busy.status, await busy.text()) == (400, "Flush cache failed.\n")
        waited = await client.get("/flush_cache", params={"timeout": "5"})
        assert waited.status == 200 and (await waited.text()).startswith("Cache flushed.")
        assert (await request).status == 200

    _run(_engine(knobs=knobs), scenario)


def test_chat_errors_are_400() -> None:
    async def scenario(client: Client) -> None:
        wrong_type = await client.post("/v1/chat/completions", data=_chat(), headers={"Content-Type": "text/plain"})
        assert wrong_type.status == 400 and (await wrong_type.json())["type"] == "Bad Request"
        too_long = await client.post("/v1/chat/completions", data=_chat(max_tokens=50_000), headers=JSON)
        assert too_long.status == 400 and "max_completion_tokens is too large" in (await too_long.json())["message"]

    _run(_engine(), scenario)


def test_continuous_usage_stats_count_up() -> None:
    async def scenario(client: Client) -> None:
        body = _chat(max_tokens=5, ignore_eos=True, stream=True,
                     stream_options={"include_usage": True, "continuous_usage_stats": True})
        events = _events(await (await client.post("/v1/chat/completions", data=body, headers=JSON)).read())
        assert [e["usage"]["completion_tokens"] for e in events if e["choices"] and "usage" in e] == [1, 2, 3, 4, 5]

    _run(_engine(), scenario)


# ---- native /generate (docs/sglang-0.5.23.md §4) ------------------------------------------------


def test_generate_streams_cumulative_text_and_spec_fields_only_at_the_end() -> None:
    async def scenario(client: Client) -> None:
        body = _generate(stream=True, sampling_params={"max_new_tokens": 60, "ignore_eos": True})
        response = await client.post("/generate", data=body, headers=JSON)
        assert response.headers["Content-Type"].startswith("text/event-stream")
        objects = _events(await response.read())
        texts = [o["text"] for o in objects]
        assert all(b.startswith(a) for a, b in itertools.pairwise(texts))  # cumulative
        assert [len(o["output_ids"]) for o in objects] == [o["meta_info"]["completion_tokens"] for o in objects]
        *partial, final = [o["meta_info"] for o in objects]
        assert final["finish_reason"] == {"type": "length", "length": 60} and final["completion_tokens"] == 60
        assert final["spec_verify_ct"] == len(objects) - 1 and "e2e_latency" in final
        assert final["spec_accept_length"] == pytest.approx(60 / final["spec_verify_ct"])
        for info in partial:
            assert info["finish_reason"] is None
            assert not {"spec_verify_ct", "spec_accept_length", "e2e_latency", "weight_versions"} & set(info)

    _run(_engine(*SPEC), scenario)


def test_generate_incremental_streaming_output_sends_deltas() -> None:
    async def scenario(client: Client) -> None:
        body = _generate(stream=True, sampling_params={"max_new_tokens": 10, "ignore_eos": True})
        objects = _events(await (await client.post("/generate", data=body, headers=JSON)).read())
        assert [len(o["output_ids"]) for o in objects] == [1] * 10

    _run(_engine("--incremental-streaming-output"), scenario)


def test_generate_single_batch_and_errors() -> None:
    async def scenario(client: Client) -> None:
        single = await (await client.post("/generate", data=_generate(sampling_params={"max_new_tokens": 7,
                                                                                        "ignore_eos": True}),
                                          headers=JSON)).json()
        assert set(single) == {"text", "output_ids", "meta_info"} and single["meta_info"]["completion_tokens"] == 7
        assert "spec_verify_ct" not in single["meta_info"]  # no speculative algorithm
        batch = await (await client.put("/generate", data=orjson.dumps({"text": ["a", "b"]}), headers=JSON)).json()
        assert isinstance(batch, list) and len(batch) == 2
        assert 64 <= batch[0]["meta_info"]["completion_tokens"] <= 128  # max_new_tokens defaults to 128
        empty = await client.post("/generate", data=orjson.dumps({"sampling_params": {}}), headers=JSON)
        assert (empty.status, await empty.json()) == (
            400, {"error": {"message": "Either text, input_ids or input_embeds should be provided."}})
        negative = await client.post("/generate", data=_generate(sampling_params={"max_new_tokens": -1}),
                                     headers=JSON)
        assert (await negative.json())["error"]["message"] == "max_new_tokens must be at least 0, got -1."

    _run(_engine(), scenario)


def test_generate_time_stats_with_metrics() -> None:
    async def scenario(client: Client) -> None:
        info = (await (await client.post("/generate", data=_generate(), headers=JSON)).json())["meta_info"]
        assert {"queue_time", "forward_entry_time", "prefill_finished_time", "request_received_ts",
                "first_token_latency", "request_finished_ts", "decode_throughput", "dp_rank"} <= set(info)
        assert info["request_received_ts"] <= info["request_finished_ts"]

    _run(_engine("--enable-metrics"), scenario)


# ---- /metrics (docs/sglang-0.5.23.md §6) --------------------------------------------------------


def _samples(text: str, name: str) -> dict[str, float]:
    return {m[1] or "": float(m[2]) for m in re.finditer(rf"^{re.escape(name)}(\{{[^}}]*\}})? (\S+)$", text, re.M)}


def test_metrics_only_with_enable_metrics() -> None:
    async def scenario(client: Client) -> None:
        assert (await client.get("/metrics")).status == 404

    _run(_engine(), scenario)


def test_metrics_move_with_requests() -> None:
    async def scenario(client: Client) -> None:
        for stream in (True, False):
            body = _chat(max_tokens=100, ignore_eos=True, stream=stream, stream_options={"include_usage": True})
            assert (await client.post("/v1/chat/completions", data=body, headers=JSON)).status == 200
        response = await client.get("/metrics")
        assert response.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        text = await response.text()
        labels = 'engine_type="unified",is_streaming="true",model_name="/models/m"'
        assert _samples(text, "sglang:generation_tokens_total")["{" + labels + "}"] == 100
        assert _samples(text, "sglang:num_requests_total")["{" + labels.replace("true", "false") + "}"] == 1
        assert _samples(text, "sglang:spec_verify_calls_total")['{engine_type="unified",model_name="/models/m"}'] > 0
        assert _samples(text, "sglang:time_to_first_token_seconds_count")["{" + labels + "}"] == 1
        scheduler = 'engine_type="unified",model_name="/models/m",moe_ep_rank="0",pp_rank="0",tp_rank="0"'
        assert _samples(text, "sglang:gen_throughput")["{" + scheduler + "}"] > 0
        assert _samples(text, "sglang:spec_accept_length")["{" + scheduler + "}"] > 1
        assert _samples(text, "sglang:max_total_num_tokens")["{" + scheduler + "}"] > 0
        assert "# TYPE sglang:inter_token_latency_seconds histogram" in text
        http = _samples(text, "sglang:http_responses_total")
        assert http['{endpoint="/v1/chat/completions",method="POST",status_code="200"}'] == 2

    _run(_engine(*SPEC, "--enable-metrics"), scenario)


# ---- continuous batching ------------------------------------------------------------------------


def _prompt(tokens: int) -> PromptSpec:
    return PromptSpec("p", 50, tokens, 0, True, None)


def test_concurrent_requests_share_each_step() -> None:
    """Aggregate throughput grows with concurrency; each stream slows a little (docs/sglang-0.5.23.md §7.2: one step
    runs the whole batch)."""
    engine = _engine(knobs=Knobs(decode_tok_s=400, ttft=0.0, boot_seconds=0.0))

    async def rates(concurrency: int) -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        start = loop.time()
        tickets = [engine.submit(engine.generation(_prompt(101))) for _ in range(concurrency)]
        for ticket in tickets:
            while not ticket.finished:
                await ticket.progressed()
        per_stream = [100 / (t.step_times[-1] - t.step_times[0]) for t in tickets]
        return concurrency * 101 / (loop.time() - start), min(per_stream)

    async def main() -> None:
        engine.start()
        try:
            (agg1, one), (agg8, eight) = await rates(1), await rates(8)
        finally:
            await engine.stop()
        assert one == pytest.approx(400, rel=0.1)
        assert agg8 > 5 * agg1
        assert 0.85 * one < eight < one

    asyncio.run(main())


def test_requests_beyond_max_running_wait_in_the_queue() -> None:
    stream = io.StringIO()
    engine = _engine("--max-running-requests", "2", knobs=Knobs(decode_tok_s=2000, ttft=0.0, boot_seconds=0.0),
                     log=SimLogger(stream=stream, access_stream=io.StringIO()))

    async def main() -> None:
        engine.start()
        try:
            tickets = [engine.submit(engine.generation(_prompt(60))) for _ in range(5)]
            await asyncio.sleep(0.01)
            assert (engine.batcher.running, engine.batcher.queued) == (2, 3)
            for ticket in tickets:
                while not ticket.finished:
                    await ticket.progressed()
        finally:
            await engine.stop()

    asyncio.run(main())
    assert "#running-req: 2, #queue-req: 3" not in stream.getvalue()  # the prefill line counts before admission
    assert re.search(r"Prefill batch, #new-seq: 2, .*#running-req: 0, #queue-req: 3,", stream.getvalue())
    assert re.search(r"Decode batch, #running-req: 2, .*#queue-req: [1-3]$", stream.getvalue(), re.M)


# ---- request-time faults ------------------------------------------------------------------------


def test_http_500_fault() -> None:
    async def scenario(client: Client) -> None:
        response = await client.post("/v1/chat/completions", data=_chat(max_tokens=5), headers=JSON)
        body = await response.json()
        assert response.status == 500 and body["type"] == "InternalServerError" and body["code"] == 500
        assert body["message"].startswith("Internal server error: ")
        generate = await client.post("/generate", data=_generate(), headers=JSON)
        assert generate.status == 500 and "error" in await generate.json()

    _run(_engine(knobs=Knobs(decode_tok_s=10_000, ttft=0.0, fault="http-500:1")), scenario)


def test_cut_stream_no_usage_and_short_faults() -> None:
    async def scenario(client: Client) -> None:
        body = _chat(max_tokens=50, ignore_eos=True, stream=True, stream_options={"include_usage": True})
        response = await client.post("/v1/chat/completions", data=body, headers=JSON)
        received = b""
        with pytest.raises(ClientPayloadError):  # the connection drops mid-response
            async for data in response.content.iter_any():
                received += data
        assert b"[DONE]" not in received and received.count(b'"content":"') == 1 + 5  # role + 5 content chunks

    _run(_engine(knobs=Knobs(decode_tok_s=10_000, ttft=0.0, fault="cut-stream:5")), scenario)

    async def usage_and_length(client: Client) -> None:
        body = _chat(max_tokens=50, ignore_eos=True, stream=True, stream_options={"include_usage": True})
        events = _events(await (await client.post("/v1/chat/completions", data=body, headers=JSON)).read())
        assert not any(e.get("usage") for e in events)
        content = [e for e in events if e["choices"] and e["choices"][0]["delta"].get("content")]
        assert len(content) == 50 - 8
        plain = await (await client.post("/v1/chat/completions", data=_chat(max_tokens=50, ignore_eos=True),
                                          headers=JSON)).json()
        assert plain["usage"] is None

    _run(_engine(knobs=Knobs(decode_tok_s=10_000, ttft=0.0, fault="no-usage,short:8")), usage_and_length)


def test_slow_after_fault_slows_later_requests() -> None:
    engine = _engine(knobs=Knobs(decode_tok_s=2000, ttft=0.0, fault="slow-after:1:3"))

    async def scenario(client: Client) -> None:
        loop = asyncio.get_running_loop()
        durations = []
        for _ in range(2):
            tic = loop.time()
            await (await client.post("/v1/chat/completions", data=_chat(max_tokens=100, ignore_eos=True),
                                     headers=JSON)).read()
            durations.append(loop.time() - tic)
        # 100 tokens at 2000 tok/s: 50 ms, then 150 ms. Paced by sleeps, neither can be shorter; a busy machine (and
        # the first request's connection) can only make them longer, so the bounds are the schedule's.
        assert durations[1] >= 0.145 and durations[0] < 0.135, durations

    _run(engine, scenario)


def test_warmup_runs_through_the_scheduler() -> None:
    stream = io.StringIO()
    engine = _engine(*SPEC, log=SimLogger(stream=stream, access_stream=io.StringIO()))

    async def main() -> None:
        engine.start()
        try:
            await engine.warmup()
        finally:
            await engine.stop()

    asyncio.run(main())
    assert "Prefill batch, #new-seq: 1, #new-token: 7," in stream.getvalue()


def test_a_failing_scheduler_loop_is_reported_not_hung() -> None:
    stream = io.StringIO()
    engine = _engine(log=SimLogger(stream=stream, access_stream=io.StringIO()))
    crashes: list[BaseException] = []

    async def broken() -> None:
        raise RuntimeError("boom")

    async def main() -> None:
        engine.batcher.run = broken  # type: ignore[method-assign]
        engine.start(on_crash=crashes.append)
        await asyncio.sleep(0.01)

    asyncio.run(main())
    assert [str(error) for error in crashes] == ["boom"]
    assert "Scheduler hit an exception: Traceback (most recent call last):" in stream.getvalue()
    assert "RuntimeError: boom" in stream.getvalue()


def test_no_server_info_fault_hides_only_the_configuration() -> None:
    """`--sim-fault no-server-info`: a server (e.g. behind a proxy) whose resolved configuration cannot be read."""
    from dataclasses import replace


    async def scenario(client: Client) -> None:
        assert [(await client.get(p)).status for p in ("/server_info", "/get_server_info")] == [404, 404]
        assert (await client.get("/v1/models")).status == 200

    _run(_engine(knobs=replace(FAST, fault="no-server-info")), scenario)
    served: list[int] = []

    async def plain(client: Client) -> None:
        served.append((await client.get("/server_info")).status)

    _run(_engine(), plain)
    assert served == [200]
