"""`POST /v1/tokenize` and `/tokenize`: SGLang's token count of a prompt or of chat messages (serving_tokenize.py,
0.5.12-0.5.23; docs/prefill.md §1), with the simulator's stand-in tokenizer (engine/content.py): `messages` count as
the chat endpoint counts them, a `prompt` text one id per 4 bytes (a BOS id first with `add_special_tokens`, the
default). Answers `{"tokens": [...], "count": N, "max_model_len": context length}`; a list of prompts gives a list
of each.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiohttp import web

from pytest_sglang_perf.simulator.api.protocol import RequestError
from pytest_sglang_perf.simulator.api.web_util import json_response
from pytest_sglang_perf.simulator.engine.content import prompt_token_ids, text_token_ids
from pytest_sglang_perf.simulator.engine.engine import SimEngine

_BOS_ID = 1


async def tokenize(request: web.Request, engine: SimEngine) -> web.Response:
    try:
        body = await request.json()
    except ValueError:
        return json_response(RequestError("Invalid JSON body").body(), status=400)
    try:
        tokens, count = _tokens(body if isinstance(body, Mapping) else {})
    except RequestError as exc:
        return json_response(exc.body(), status=exc.status)
    return json_response({"tokens": tokens, "count": count, "max_model_len": engine.setup.resolution.context_len})


def _tokens(body: Mapping[str, Any]) -> tuple[list[int] | list[list[int]], int | list[int]]:
    messages, prompt = body.get("messages"), body.get("prompt")
    special = body.get("add_special_tokens", True) is not False
    if isinstance(messages, list):
        ids = list(prompt_token_ids(m for m in messages if isinstance(m, Mapping)))
        return ids, len(ids)
    if isinstance(prompt, str):
        ids = _prompt_ids(prompt, special)
        return ids, len(ids)
    if isinstance(prompt, list) and all(isinstance(text, str) for text in prompt):
        lists = [_prompt_ids(text, special) for text in prompt]
        return lists, [len(ids) for ids in lists]
    raise RequestError(f"Invalid prompt type: {type(prompt)}. Expected str or List[str].")


def _prompt_ids(text: str, special: bool) -> list[int]:
    return ([_BOS_ID] if special else []) + list(text_token_ids(text))
