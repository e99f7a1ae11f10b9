"""SGLang 0.5.23's ServerArgs record beyond its command line, for `server_args=` and `/server_info`.

`ServerArgs.resolved_dict()` holds every record field: the flags (less `--config`, which is not a field), fields
without a flag, and each field's resolved value. Here: the flagless fields with the values a plain launch resolves
them to, the fallbacks fields declare (`arg_utils.py::fallbacks_of`), and the defaults a few hooks declare
unconditionally on every device. Device- and model-specific hooks are not modelled (tests/sglang_cpu/contract lists
them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

NOT_FIELDS = ("config",)
"""Command-line dests that are not record fields (`--config` is merged into argv, then dropped)."""
FLAGLESS_FIELDS: Mapping[str, Any] = {
    "custom_sigquit_handler": None, "grpc_worker_threads": 4, "stat_loggers": None,
    "_speculative_draft_quantization_explicitly_set": False, "uses_mamba_radix_cache": False,
    "_radix_eviction_policy_explicitly_set": False, "_swa_full_tokens_ratio_explicitly_set": False,
    "speculative_boundary_reduction": "rs+rsv", "enable_cp_tp_group_sharing": False, "watermark_key": None,
    "watermark_key_b": None, "watermark_context_window": 4, "watermark_mixing_probability": 0.5,
    "watermark_max_probability": 1.0, "watermark_default_enabled": False, "watermark_enforce_all": False,
    "aux_hidden_state_capture": None,
}
DECLARED_FALLBACKS: Mapping[str, Any] = {
    "enable_tf32_matmul": False, "swa_full_tokens_ratio": 0.8, "mamba_full_memory_ratio": 0.9,
    "mm_enable_dp_encoder": False,
}
UNSET_DEFAULTS: Mapping[str, Any] = {
    "grammar_backend": "xgrammar",  # serving_hook.py::handle_grammar_backend
    "prefill_decode_interval": 0,  # validation_hook.py::default_unset_prefill_decode_interval (Qwen3-VL aside)
}
"""Values hooks declare for a field left unset (None)."""


def complete_record(values: dict[str, Any]) -> None:
    """Turn parsed flags (by dest) into the record's field set, with the device-independent defaults resolved."""
    for dest in NOT_FIELDS:
        values.pop(dest, None)
    for name, value in FLAGLESS_FIELDS.items():
        values.setdefault(name, value)
    for name, value in {**DECLARED_FALLBACKS, **UNSET_DEFAULTS}.items():
        if values.get(name) is None:
            values[name] = value
    if values.get("mm_process_config") is None:  # serving_hook.py::handle_missing_default_values
        values["mm_process_config"] = {}
    if values.get("custom_weight_loader") is None:  # model_path_hook.py::_handle_load_format
        values["custom_weight_loader"] = []
    if values.get("load_balance_method") == "auto":  # serving_hook.py::_handle_load_balance_method
        prefill = values.get("disaggregation_mode") == "prefill"
        values["load_balance_method"] = "follow_bootstrap_room" if prefill else "round_robin"
    _parallel_defaults(values)


def _parallel_defaults(values: dict[str, Any]) -> None:
    """overrides.py::_dcp_comm_backend_default (without DCP), ::_tp_lm_head_all_to_all_default and
    hicache_hook.py::handle_hicache_ratio_default."""
    if values.get("dcp_comm_backend") is None and int(values.get("dcp_size") or 1) <= 1:
        values["dcp_comm_backend"] = "ag_rs"
    if values.get("enable_tp_lm_head_all_to_all") is None:
        attn_dp = int(values.get("attn_dp_size") or 1)
        values["enable_tp_lm_head_all_to_all"] = (
            values.get("disaggregation_mode") == "decode" and attn_dp > 1
            and int(values.get("tp_size") or 1) == attn_dp and int(values.get("attn_cp_size") or 1) == 1
            and not values.get("enable_dp_lm_head"))
    explicit_ratio = values.get("hicache_ratio") is not None
    if explicit_ratio or int(values.get("hicache_size") or 0) > 0:
        values["hicache_host_memory_fraction"] = None
    if not explicit_ratio and values.get("disaggregation_mode") != "decode":
        values["hicache_ratio"] = 1.2 if values.get("hicache_host_memory_mode") == "buffer_only" else 2.0


REDACTED = "<redacted>"
WATERMARK_SECRETS = ("watermark_config", "watermark_key", "watermark_key_b")
"""Shown as `<redacted>` wherever SGLang prints the record (sampling/watermarking/core.py)."""


def shown_record(values: Mapping[str, Any]) -> dict[str, Any]:
    """The record as `server_args=` and `/server_info` show it: watermark secrets redacted."""
    return {**values, **dict.fromkeys(WATERMARK_SECRETS, REDACTED)}


def scheduler_record(values: Mapping[str, Any], max_running_requests: int) -> dict[str, Any]:
    """The record as a scheduler's `internal_states` entry shows it (internal_state.py::get_internal_state),
    with the fields the scheduler fills in at startup (scheduler.py, mem_cache/kv_cache_builder.py)."""
    state = shown_record(values)
    state.pop("custom_sigquit_handler", None)
    if not state.get("pp_max_micro_batch_size"):
        state["pp_max_micro_batch_size"] = max(max_running_requests // int(values.get("pp_size") or 1), 1)
    if state.get("disaggregation_decode_retraction_backup") is None:
        decode = values.get("disaggregation_mode") == "decode"
        state["disaggregation_decode_retraction_backup"] = "host_pool" if decode else "cpu_tensor"
    return state


def hicache_layout(values: Mapping[str, Any]) -> dict[str, Any]:
    """`hicache_object_layout` of `/server_info` (mem_cache/hicache_storage.py::disabled_l3_layout)."""
    enabled = bool(values.get("enable_hierarchical_cache"))
    reason = "Mooncake storage is not attached" if enabled else "Hierarchical cache is disabled"
    backend = values.get("hicache_storage_backend") if enabled else None
    return {"enabled": False, "backend": backend, "page_size": values.get("page_size"),
            "hicache_object_layout": {"pools": []}, "reason": reason}
