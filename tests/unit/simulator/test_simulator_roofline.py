"""The roofline timing model (roofline.py): the seed scenario's figures and the physics each term follows."""

from __future__ import annotations

import pytest
from sim_setup import LLAMA_1B, SEED_CONFIG, SEED_FLAGS, costs, resolve

from pytest_sglang_perf.sglang_facts.gpus import find_gpu, load_gpu_table
from pytest_sglang_perf.sglang_facts.model_sizes import model_config_from_dict
from pytest_sglang_perf.sglang_facts.rules import load_rules

ACCEPT = 3.0


def _seed_rate(*extra: str, gpu: str = "RTX A6000") -> float:
    """Decode tokens/s of one stream: accept length / decode step."""
    return ACCEPT / costs(SEED_CONFIG, *SEED_FLAGS, *extra, gpu=gpu).decode_step(1, 600)


def test_seed_model_counts_about_27b_parameters() -> None:
    model = model_config_from_dict("/m", SEED_CONFIG)
    assert 26.5e9 < model.param_count() < 27.5e9
    assert model.mtp_layers == 1
    [sbo] = load_rules("0.5.23").fatal_on_gpu  # its text config class defines an MoE top-k: SBO dies on SM90
    assert sbo.model is not None and sbo.model.matches_fields(model.text_keys, model.text_model_type)


def test_seed_scenario_decodes_like_the_engineers_two_a6000() -> None:
    """27B, 3-step MTP (NEXTN), tp 2 on RTX A6000: the engineer measured 50-57 tok/s."""
    assert 50 <= _seed_rate() <= 57


@pytest.mark.parametrize("variant", [("--cuda-graph-backend-prefill", "breakable"),
                                     ("--enable-single-batch-overlap",), ("--cuda-graph-backend-prefill", "disabled")])
def test_prefill_graph_and_single_batch_overlap_leave_decode_where_it_was(variant: tuple[str, ...]) -> None:
    assert _seed_rate(*variant) == _seed_rate()


def test_prefill_graph_shortens_the_prefill_only_while_it_covers_the_prompt() -> None:
    with_graph = costs(SEED_CONFIG, *SEED_FLAGS, gpu="RTX A6000")
    without = costs(SEED_CONFIG, *SEED_FLAGS, "--cuda-graph-backend-prefill", "disabled", gpu="RTX A6000")
    assert with_graph.uses_prefill_graph(500) and not without.uses_prefill_graph(500)
    assert with_graph.prefill(500) < without.prefill(500)
    too_long = with_graph.prefill_graph_max_tokens + 1
    assert with_graph.prefill(too_long) == without.prefill(too_long)


def test_no_decode_graph_costs_launch_overhead() -> None:
    graph = costs(SEED_CONFIG, *SEED_FLAGS, gpu="RTX A6000")
    eager = costs(SEED_CONFIG, *SEED_FLAGS, "--cuda-graph-backend-decode", "disabled", gpu="RTX A6000")
    assert eager.decode_step(1, 0) > graph.decode_step(1, 0) * 1.05
    with_graph, without = graph.decode_split(1, 0), eager.decode_split(1, 0)
    assert without.kernels == with_graph.kernels and without.overhead > with_graph.overhead  # the same kernels,
    # plus their launches
    beyond = graph.decode_graph_max_bs + 1  # batches larger than the captured sizes run eagerly too
    assert graph.uses_decode_graph(graph.decode_graph_max_bs) and not graph.uses_decode_graph(beyond)


def test_speculative_decoding_pays_for_its_draft_steps() -> None:
    plain = costs(SEED_CONFIG, "--tp-size", "2", gpu="RTX A6000").decode_step(1, 600)
    spec = costs(SEED_CONFIG, *SEED_FLAGS, gpu="RTX A6000").decode_step(1, 600)
    assert plain * 1.1 < spec < plain * 1.5  # one verify + 3 draft forwards of one layer and the LM head
    assert ACCEPT / spec > 2 / plain  # still worth it at accept length 3


def test_tensor_parallel_halves_the_weights_but_adds_all_reduces() -> None:
    one = costs(SEED_CONFIG, gpu="H100 SXM")
    two = costs(SEED_CONFIG, "--tp-size", "2", gpu="H100 SXM")
    assert two.weight_bytes == pytest.approx(one.weight_bytes / 2)
    assert one.decode_step(1, 0) / 2 < two.decode_step(1, 0) < one.decode_step(1, 0)


def test_faster_memory_decodes_faster() -> None:
    rates = [_seed_rate(gpu=name) for name in ("RTX A6000", "A100 80GB", "H100 SXM", "H200", "B200")]
    assert rates == sorted(rates)
    assert rates[2] / rates[0] > 2.5  # 3350 vs 768 GB/s, less the fixed overheads


def test_batching_grows_aggregate_throughput_and_slows_each_stream() -> None:
    model = costs(LLAMA_1B, gpu="RTX A6000")
    per_stream = [1 / model.decode_step(batch, batch * 600) for batch in (1, 8, 32)]
    aggregate = [rate * batch for rate, batch in zip(per_stream, (1, 8, 32), strict=True)]
    assert aggregate == sorted(aggregate) and per_stream == sorted(per_stream, reverse=True)
    assert per_stream[1] > 0.8 * per_stream[0]  # a small batch costs each stream little


def test_big_prefills_are_compute_bound() -> None:
    model = costs(SEED_CONFIG, *SEED_FLAGS, gpu="RTX A6000")
    assert model.prefill(8000) > 3 * model.prefill(2000) > 3 * model.prefill(10)


def test_gpu_table() -> None:
    table = load_gpu_table()
    assert {gpu.sm for gpu in table.gpus} >= {86, 80, 90, 100}
    assert find_gpu("rtx a6000").name == "NVIDIA RTX A6000" and find_gpu().name == "NVIDIA H100 80GB HBM3"
    assert find_gpu("H200").memory_mib > find_gpu("H100").memory_mib
    for gpu in table.gpus:  # what a read probe and decode GEMVs reach: below the datasheet peak
        assert max(gpu.gemv_bandwidth_gb_s, gpu.read_bandwidth_gb_s) < gpu.bandwidth_gb_s
    with pytest.raises(ValueError, match=r"unknown GPU 'V100'; known GPUs.*RTX A6000"):
        find_gpu("V100")


def test_resolution_sizes_for_the_simulated_gpu() -> None:
    _, small, _ = resolve(LLAMA_1B, gpu="RTX A6000")
    _, big, _ = resolve(LLAMA_1B, gpu="H200")
    assert (small["chunked_prefill_size"], big["chunked_prefill_size"]) == (4096, 8192)
    assert small.cuda_graph.decode.max_bs == 32 and big.cuda_graph.decode.max_bs == 256
