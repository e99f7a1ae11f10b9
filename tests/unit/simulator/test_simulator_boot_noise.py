"""Each simulated boot draws noise of its own (simulator/args/knobs.py `boot`, engine.py): its offset and its
requests' jitter are seeded from --sim-seed and the boot's label, so boots differ as real ones do and a run that
labels its boots the same way replays them; --sim-boot-noise sizes the offset apart from the jitter."""

from __future__ import annotations

import dataclasses

from sim_setup import LLAMA_1B, engine

from pytest_sglang_perf.session.boots import SIM_BOOT_ENV
from pytest_sglang_perf.simulator.args.knobs import ENV_PREFIX, Knobs
from pytest_sglang_perf.simulator.engine.requests import PromptSpec

NOISY = Knobs(noise=0.05, boot_seconds=0.0)


def offset(knobs: Knobs) -> float:
    """The boot's offset: its time scale over the knobs' own (1 + slowdown)."""
    return engine(LLAMA_1B, knobs=knobs).pacing.time_scale / knobs.time_scale


def test_each_boot_label_draws_its_own_offset_and_the_same_label_replays_it() -> None:
    labels = [f"default#{n}" for n in range(1, 7)]
    offsets = [offset(dataclasses.replace(NOISY, boot=label)) for label in labels]
    assert len(set(offsets)) == len(offsets)
    assert offsets == [offset(dataclasses.replace(NOISY, boot=label)) for label in labels]
    assert offset(NOISY) == offset(NOISY) != offsets[0]  # no label: the seed alone, as before labels


def test_boot_noise_sizes_the_offset_apart_from_the_request_jitter() -> None:
    still = dataclasses.replace(NOISY, boot="a#1", boot_noise=0.0)
    assert offset(still) == 1.0
    wide = [offset(dataclasses.replace(NOISY, boot=f"a#{n}", boot_noise=0.2)) for n in range(1, 9)]
    narrow = [offset(dataclasses.replace(NOISY, boot=f"a#{n}", boot_noise=0.01)) for n in range(1, 9)]
    assert max(abs(x - 1) for x in narrow) < 0.05 < max(abs(x - 1) for x in wide)


def test_the_requests_jitter_follows_the_boot_label() -> None:
    prompt = PromptSpec(digest="d", prompt_tokens=16, max_tokens=8, min_tokens=0, ignore_eos=True, seed=1)
    first = engine(LLAMA_1B, knobs=dataclasses.replace(NOISY, boot="a#1")).generation(prompt).jitter
    again = engine(LLAMA_1B, knobs=dataclasses.replace(NOISY, boot="a#1")).generation(prompt).jitter
    other = engine(LLAMA_1B, knobs=dataclasses.replace(NOISY, boot="a#2")).generation(prompt).jitter
    assert first == again != other


def test_the_plugin_sets_the_simulators_boot_knob() -> None:
    assert SIM_BOOT_ENV == ENV_PREFIX + "BOOT"
