"""The HTTP app in-process (aiohttp test server on 127.0.0.1): readiness, auth, info, chat, decode stats."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

from pytest_sglang_perf.simulator.app import build_app
from pytest_sglang_perf.simulator.boot import BootPlan, SchedulerBoot
from pytest_sglang_perf.simulator.engine import EngineSetup, ServerStatus, SimEngine
from pytest_sglang_perf.simulator.flags import DEFAULT_TABLE, build_parser, load_flag_table
from pytest_sglang_perf.simulator.hardware import H100_80GB
from pytest_sglang_perf.simulator.knobs import Knobs, knob_dests
from pytest_sglang_perf.simulator.logs import SimLogger
from pytest_sglang_perf.simulator.memory import plan_memory
from pytest_sglang_perf.simulator.model import model_config_from_dict
from pytest_sglang_perf.simulator.resolve import resolve_args

pytestmark = pytest.mark.skipif(not DEFAULT_TABLE.exists(), reason="the real SGLang flag table is not generated yet")

MODEL = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 4096, "num_hidden_layers": 36,
         "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 12288,
         "vocab_size": 151936, "max_position_embeddings": 40960, "eos_token_id": 151645}
SPEC = ("--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4")
FAST = Knobs(decode_tok_s=100_000, ttft=0.0, accept_length=3.0, boot_seconds=0.0)


async def _no_sleep(seconds: float) -> None:
    return None


def _engine(*flags: str, knobs: Knobs = FAST) -> SimEngine:
    model = model_config_from_dict("/models/qwen3", MODEL)
    namespace = build_parser(load_flag_table()).parse_args(["--model-path", model.path, *flags])
    raw: dict[str, Any] = {k: v for k, v in vars(namespace).items() if k not in knob_dests()}
    resolution = resolve_args(raw, model, H100_80GB)
    memory = plan_memory(resolution, model, H100_80GB)
    quiet = SimLogger(stream=io.StringIO(), access_stream=io.StringIO())
    boot = SchedulerBoot(resolution, model, memory, BootPlan.split(0.0, resolution, True), quiet, _no_sleep)
    startup = asyncio.run(boot.run())
    return SimEngine(EngineSetup(resolution, model, memory, knobs, startup, 0.0, " ".join(flags)), quiet)


def _run(engine: SimEngine, scenario: Callable[[TestClient[Any, Any]], Awaitable[None]]) -> None:
    async def main() -> None:
        async with TestClient(TestServer(build_app(engine), host="127.0.0.1")) as client:
            await scenario(client)

    asyncio.run(main())


def _chat(**fields: Any) -> bytes:
    return orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], **fields})


def _events(body: bytes) -> list[dict[str, Any]]:
    events = [part[6:] for part in body.split(b"\n\n") if part.startswith(b"data: ")]
    assert events[-1] == b"[DONE]"
    return [orjson.loads(event) for event in events[:-1]]


def test_health_is_503_until_ready() -> None:
    engine = _engine()

    async def scenario(client: TestClient[Any, Any]) -> None:
        assert [(await client.get(p)).status for p in ("/health", "/health_generate", "/ready")] == [503] * 3
        assert (await client.get("/model_info")).status == 200  # info endpoints answer during warmup
        engine.status = ServerStatus.UP
        assert [(await client.get(p)).status for p in ("/health", "/health_generate", "/ready")] == [200] * 3
        engine.status = ServerStatus.EXITING
        assert (await client.get("/health")).status == 503

    _run(engine, scenario)


def test_api_key_guards_all_but_health() -> None:
    engine = _engine("--api-key", "sk-test")
    engine.status = ServerStatus.UP

    async def scenario(client: TestClient[Any, Any]) -> None:
        denied = await client.get("/v1/models")
        assert denied.status == 401 and await denied.json() == {"error": "Unauthorized"}
        assert (await client.get("/v1/models", headers={"Authorization": "Bearer sk-test"})).status == 200
        assert (await client.get("/health")).status == 200

    _run(engine, scenario)


def test_models_endpoints() -> None:
    async def scenario(client: TestClient[Any, Any]) -> None:
        card = (await (await client.get("/v1/models")).json())["data"][0]
        assert card["id"] == "/models/qwen3" and card["max_model_len"] == 40960
        assert (await client.get("/v1/models/%2Fmodels%2Fqwen3")).status == 200
        missing = await client.get("/v1/models/other")
        assert missing.status == 404 and (await missing.json())["error"]["code"] == "model_not_found"

    _run(_engine(), scenario)


def test_spec_stream_chunks_match_verify_steps_and_feed_server_info() -> None:
    engine = _engine(*SPEC)
    engine.status = ServerStatus.UP

    async def scenario(client: TestClient[Any, Any]) -> None:
        body = _chat(max_tokens=400, ignore_eos=True, stream=True, return_spec_tokens_details=True,
                     stream_options={"include_usage": True})
        response = await client.post("/v1/chat/completions", data=body, headers={"Content-Type": "application/json"})
        events = _events(await response.read())
        content = [e for e in events if e["choices"] and e["choices"][0]["delta"].get("content")]
        details = next(e["sglext"]["spec_tokens_details"] for e in events if "sglext" in e)
        assert events[-1]["usage"]["completion_tokens"] == 400
        assert len(content) == details["spec_verify_ct"] + 1
        state = (await (await client.get("/server_info")).json())["internal_states"][0]
        assert state["avg_spec_accept_length"] == pytest.approx(3.0, abs=0.6)
        assert state["last_gen_throughput"] > 0
        assert (await client.post("/flush_cache")).status == 200
        state = (await (await client.get("/server_info")).json())["internal_states"][0]
        assert "avg_spec_accept_length" not in state

    _run(engine, scenario)


def test_chat_errors_are_400() -> None:
    async def scenario(client: TestClient[Any, Any]) -> None:
        wrong_type = await client.post("/v1/chat/completions", data=_chat(), headers={"Content-Type": "text/plain"})
        assert wrong_type.status == 400 and (await wrong_type.json())["type"] == "Bad Request"
        too_long = await client.post("/v1/chat/completions", data=_chat(max_tokens=50_000),
                                     headers={"Content-Type": "application/json"})
        assert too_long.status == 400 and "max_completion_tokens is too large" in (await too_long.json())["message"]

    _run(_engine(), scenario)


def test_continuous_usage_stats_count_up() -> None:
    async def scenario(client: TestClient[Any, Any]) -> None:
        body = _chat(max_tokens=5, ignore_eos=True, stream=True,
                     stream_options={"include_usage": True, "continuous_usage_stats": True})
        response = await client.post("/v1/chat/completions", data=body, headers={"Content-Type": "application/json"})
        events = _events(await response.read())
        counts = [e["usage"]["completion_tokens"] for e in events if e["choices"] and "usage" in e]
        assert counts == [1, 2, 3, 4, 5]

    _run(_engine(), scenario)
