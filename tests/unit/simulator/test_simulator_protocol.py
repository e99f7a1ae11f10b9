"""Chat-completions JSON shapes, compared with SGLang 0.5.23's (docs/sglang-0.5.23.md §3, protocol.py)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from pytest_sglang_perf.simulator.api.protocol import (
    DONE,
    ChatRequest,
    ChunkEncoder,
    RequestError,
    check_content_type,
    check_request,
    completion_response,
    parse_chat_request,
    spec_tokens_details,
    usage_dict,
)
from pytest_sglang_perf.simulator.engine.requests import Outcome

CHUNK_KEYS = ["id", "object", "created", "model", "choices"]
CHOICE_KEYS = ["index", "delta", "logprobs", "finish_reason", "matched_stop"]
USAGE_KEYS = ["prompt_tokens", "total_tokens", "completion_tokens", "prompt_tokens_details", "reasoning_tokens",
              "completion_tokens_details"]
SPEC_KEYS = ["spec_accept_rate", "spec_accept_length", "spec_cap_length", "spec_block_accept_length",
             "spec_num_correct_drafts", "spec_num_proposed_drafts", "spec_verify_ct",
             "spec_correct_drafts_histogram", "spec_cap_lens_histogram"]

OUTCOME = Outcome(prompt_tokens=20, completion_tokens=10, finish_reason="length", matched_stop=None, verify_ct=4,
                  correct_drafts=5, correct_drafts_histogram=(1, 1, 1, 1), num_draft_tokens=4)


def _event(chunk: bytes) -> dict[str, Any]:
    assert chunk.startswith(b"data: ") and chunk.endswith(b"\n\n")
    decoded: dict[str, Any] = orjson.loads(chunk[6:-2])
    return decoded


def _chat(**fields: Any) -> ChatRequest:
    body = {"model": "m", "messages": [{"role": "user", "content": "hello"}], **fields}
    return parse_chat_request(orjson.dumps(body))


def test_role_and_content_chunks() -> None:
    encoder = ChunkEncoder("abc", 1700000000, "my-model")
    role, content = _event(encoder.role()), _event(encoder.content(' say "hi"\n'))
    for chunk in (role, content):
        assert list(chunk) == CHUNK_KEYS
        assert chunk["object"] == "chat.completion.chunk" and chunk["model"] == "my-model"
        assert list(chunk["choices"][0]) == CHOICE_KEYS
    assert role["choices"][0]["delta"] == {"reasoning_content": None, "role": "assistant", "content": ""}
    assert content["choices"][0]["delta"] == {"reasoning_content": None, "content": ' say "hi"\n'}
    assert content["choices"][0]["finish_reason"] is None


def test_finish_sglext_and_usage_chunks() -> None:
    encoder = ChunkEncoder("abc", 1, "m")
    finish = _event(encoder.finish("stop", 151645))
    assert finish["choices"][0]["delta"] == {"reasoning_content": None}
    assert (finish["choices"][0]["finish_reason"], finish["choices"][0]["matched_stop"]) == ("stop", 151645)
    details = spec_tokens_details(OUTCOME)
    assert details is not None
    sglext = _event(encoder.sglext(details))
    assert list(sglext) == [*CHUNK_KEYS, "usage", "sglext"]
    assert sglext["choices"] == [] and sglext["usage"] is None
    assert list(sglext["sglext"]["spec_tokens_details"]) == SPEC_KEYS
    usage = _event(encoder.usage(usage_dict(OUTCOME, cache_report=False)))
    assert list(usage) == [*CHUNK_KEYS, "usage"] and usage["choices"] == []
    assert list(usage["usage"]) == USAGE_KEYS
    assert DONE == b"data: [DONE]\n\n"


def test_content_with_continuous_usage() -> None:
    chunk = _event(ChunkEncoder("a", 1, "m").content_with_usage(" x", usage_dict(OUTCOME, cache_report=False)))
    assert list(chunk) == [*CHUNK_KEYS, "usage"]


def test_usage_values() -> None:
    usage = usage_dict(OUTCOME, cache_report=False)
    assert (usage["prompt_tokens"], usage["completion_tokens"], usage["total_tokens"]) == (20, 10, 30)
    assert usage["reasoning_tokens"] == 0 and usage["prompt_tokens_details"] is None
    assert usage_dict(OUTCOME, cache_report=True)["prompt_tokens_details"] == {"cached_tokens": 0}


def test_spec_tokens_details_values() -> None:
    details = spec_tokens_details(OUTCOME)
    assert details is not None
    assert details["spec_verify_ct"] == 4
    assert details["spec_accept_length"] == pytest.approx(10 / 4)
    assert details["spec_num_proposed_drafts"] == 4 * 3
    assert details["spec_accept_rate"] == pytest.approx(5 / 12)


def test_no_spec_details_without_verify_steps() -> None:
    no_verify = Outcome(20, 1, "length", None, 0, 0, (), 4)
    assert spec_tokens_details(no_verify) is None


def test_non_streamed_response_shape() -> None:
    body = completion_response("rid", 5, _chat(return_spec_tokens_details=True), "text", OUTCOME, False, "default")
    assert list(body) == ["id", "object", "created", "model", "choices", "usage", "metadata", "sglext"]
    assert body["object"] == "chat.completion" and body["metadata"] == {
        "weight_version": "default", "weight_versions": [{"version": "default", "start": 0, "end": 10}]}
    choice = body["choices"][0]
    assert list(choice) == ["index", "message", "logprobs", "finish_reason", "matched_stop"]
    assert choice["message"] == {"role": "assistant", "content": "text", "reasoning_content": None}
    assert "sglext" not in completion_response("rid", 5, _chat(), "text", OUTCOME, False, "default")


def test_parse_request_fields() -> None:
    chat = _chat(max_tokens=64, ignore_eos=True, seed=3, stream=True, stream_options={"include_usage": True},
                 return_spec_tokens_details=True)
    assert (chat.max_tokens, chat.ignore_eos, chat.seed, chat.stream) == (64, True, 3, True)
    assert chat.include_usage and chat.return_spec_tokens_details and chat.n == 1
    assert _chat(max_tokens=64, max_completion_tokens=32).max_tokens == 32
    assert _chat().include_usage is False
    assert parse_chat_request(orjson.dumps({"messages": []}), default_include_usage=True).include_usage


@pytest.mark.parametrize(("body", "fragment"), [
    (b"{not json", "JSON decode error"),
    (b"[1, 2]", "valid dictionary"),
    (b'{"model": "m"}', "messages\n  Field required"),
    (b'{"messages": [], "max_tokens": "ten"}', "max_tokens\n  Input should be a valid integer"),
    (b'{"messages": [], "max_tokens": -1}', "max_new_tokens must be at least 0, got -1."),
    (b'{"messages": [], "stream": "yes"}', "stream\n  Input should be a valid bool"),
])
def test_bad_requests_are_400(body: bytes, fragment: str) -> None:
    with pytest.raises(RequestError) as exc:
        parse_chat_request(body)
    assert exc.value.status == 400 and fragment in exc.value.message
    assert list(exc.value.body()) == ["object", "message", "type", "param", "code"]
    assert exc.value.body()["code"] == 400


def test_content_type_must_be_json() -> None:
    check_content_type("application/json; charset=utf-8")
    with pytest.raises(RequestError, match="Only 'application/json' is allowed"):
        check_content_type("text/plain")


def test_semantic_checks() -> None:
    with pytest.raises(RequestError, match=r"Messages cannot be empty\."):
        check_request(parse_chat_request(b'{"messages": []}'), 3, 4096)
    with pytest.raises(RequestError, match="maximum context length of 100 tokens"):
        check_request(_chat(max_tokens=90), 20, 100)
    with pytest.raises(RequestError, match="longer than the model's context length"):
        check_request(_chat(), 100, 100)
    check_request(_chat(max_tokens=80), 20, 100)
