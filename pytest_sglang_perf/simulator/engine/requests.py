"""What the engine takes and gives per request, whichever API sent it: a PromptSpec in, a planned Generation out."""

from __future__ import annotations

from dataclasses import dataclass

from pytest_sglang_perf.simulator.engine.schedule import TokenPlan


@dataclass(frozen=True)
class PromptSpec:
    """What the engine needs to know of one prompt."""

    digest: str
    prompt_tokens: int
    max_tokens: int | None
    min_tokens: int
    ignore_eos: bool
    seed: int | None
    token_ids: tuple[int, ...] = ()
    """The prompt's (stand-in) token ids, for the prefix cache; empty: the prompt is never cached or matched."""


@dataclass(frozen=True)
class Outcome:
    """What a finished request reports: token counts, finish reason and speculative statistics."""

    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    matched_stop: int | None
    verify_ct: int
    correct_drafts: int
    correct_drafts_histogram: tuple[int, ...]
    num_draft_tokens: int


@dataclass(frozen=True)
class Generation:
    """One request, planned: its id, tokens per step, their texts and ids, and its final numbers."""

    rid: str
    created: int
    plan: TokenPlan
    texts: tuple[str, ...]
    """Text of each step, aligned with plan.step_tokens."""
    ids: tuple[tuple[int, ...], ...]
    """Token ids of each step."""
    outcome: Outcome
    jitter: float
    prompt_ids: tuple[int, ...] = ()
    """PromptSpec.token_ids: what the prefix cache matches and keeps."""
