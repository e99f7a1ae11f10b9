"""The session's bandwidth ceilings: the GPU probe (once, before the first real boot), each variant's model bytes,
and each decode cell's ceiling, efficiency and diagnosis (roofline/ceiling.py; docs/roofline.md).

Plain Python (no pytest). A cell gets a `DecodeCeiling`, or a sentence saying why it has none (a CPU run, a model
without a config.json, a GPU the table does not know and the probe did not measure): never a silent gap.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_sglang_perf.config.settings import Settings
from pytest_sglang_perf.errors import SGLangPerfError
from pytest_sglang_perf.gate.efficiency import efficiency_values
from pytest_sglang_perf.measurement.metrics import EFFICIENCY, PREFILL
from pytest_sglang_perf.measurement.result import Result
from pytest_sglang_perf.measurement.stats import Summary
from pytest_sglang_perf.roofline.ceiling import Bandwidth, DecodeCeiling
from pytest_sglang_perf.roofline.prefill_ceiling import PrefillCeiling
from pytest_sglang_perf.roofline.server_shape import (
    decode_shape,
    draft_model_path,
    kv_dtype_bytes,
    speculative_algorithm,
)
from pytest_sglang_perf.roofline.step_bytes import decode_step_bytes
from pytest_sglang_perf.roofline.weights import WeightBytes, weights_from_config
from pytest_sglang_perf.server.model_dir import local_model_dir
from pytest_sglang_perf.server.plan import flag_value
from pytest_sglang_perf.server.target_gpus import TargetGpus
from pytest_sglang_perf.session.variant_run import VariantRun
from pytest_sglang_perf.sglang_facts.gpus import Gpu, GpuTableError, find_gpu

if TYPE_CHECKING:
    from pytest_sglang_perf.hardware.probe import ProbeReport

NO_GPU = "no GPU: a run on the CPU has no memory-bandwidth ceiling"


class SessionRoofline:
    """What the session knows about the physical limit: the probe's report and each variant's model bytes."""

    def __init__(self, settings: Settings, gpus: TargetGpus, *, simulate: bool, probe: bool = True,
                 say: Callable[[str], None] | None = None, cache: Path | None = None) -> None:
        self._settings = settings
        self._gpus = gpus
        self._simulate = simulate
        self._probe_wanted = probe
        self._say = say or (lambda _: None)
        self.probe: ProbeReport | None = None
        """The probe's report, once it ran (a real run on a host with GPUs, before its first boot)."""
        self._weights: dict[str, WeightBytes | str] = {}
        self._cache = cache
        """--sglang-reuse: where the probe's report is kept for a later run that boots nothing (docs/reuse.md)."""

    def before_boot(self, visible: str | None = None) -> None:
        """Run the probe once, in a process of its own, before any server holds the GPUs' memory; `visible`: the
        GPUs claimed for the first server (CUDA_VISIBLE_DEVICES), the only ones free of other servers then."""
        if self.probe is not None or self._simulate or not self._probe_wanted or not self._gpus.names:
            return
        from pytest_sglang_perf.hardware.probe import probe_in_subprocess

        self._say("probing the GPUs before the first boot: their read bandwidth and GEMM rate, for the decode and "
                  "prefill ceilings (--sglang-no-probe skips it)")
        self.probe = probe_in_subprocess(visible=visible)
        self._say(f"GPU probe: {probe_text(self.probe)}")
        self._keep_probe()

    def _keep_probe(self) -> None:
        if self._cache is None or self.probe is None:
            return
        from datetime import datetime

        self._cache.parent.mkdir(parents=True, exist_ok=True)
        doc = {"at": datetime.now().isoformat(timespec="seconds"), "report": self.probe.to_dict()}
        self._cache.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")

    def _earlier_probe(self) -> None:
        """A run on kept servers boots nothing, so it never probes: the report of the run that did, on this host's
        same GPUs, stands in (said so in its `via`)."""
        if (self.probe is not None or self._cache is None or self._simulate or not self._probe_wanted
                or not self._gpus.names):
            return
        from pytest_sglang_perf.hardware.probe import ProbeReport

        try:
            doc = json.loads(self._cache.read_text(encoding="utf-8"))
            report = ProbeReport.from_dict(doc["report"])
        except (OSError, ValueError, KeyError, TypeError):
            return
        if sorted(gpu.name for gpu in report.gpus) != sorted(self._gpus.names):
            return
        self.probe = replace(report, via=f"{report.via}; probed at {doc.get('at')} by the run that booted the kept "
                                         "servers (--sglang-reuse)")
        self._say(f"GPU probe (an earlier run's): {probe_text(self.probe)}")

    def annotate(self, run: VariantRun, result: Result) -> Result:
        """`result` with its decode ceiling, or the reason it has none; with `tolerance.bandwidth_efficiency` set,
        its per-request share of the ceiling too (the optional gate, gate/efficiency.py); a prefill cell with its
        compute ceiling (session/prefill_roofline.py)."""
        self._earlier_probe()
        result = replace(result, prefill_roofline=self._prefill(run, result))
        try:
            ceiling = self.ceiling(run, result)
        except Exception as exc:  # a diagnostic never fails a measurement: its failure is reported as the reason
            ceiling = f"no ceiling: computing it failed ({type(exc).__name__}: {exc})"
        if EFFICIENCY not in self._settings.tolerances or not isinstance(ceiling, DecodeCeiling):
            return replace(result, roofline=ceiling)
        shares = efficiency_values(result.values["decode_throughput"], ceiling.tok_s)
        return replace(result, roofline=ceiling, values={**result.values, EFFICIENCY: shares},
                       summaries={**result.summaries, EFFICIENCY: Summary.of(shares)})

    def ceiling(self, run: VariantRun, result: Result) -> DecodeCeiling | str | None:
        """None for a cell without decode (no sample decoded two tokens)."""
        decode = result.values.get("decode_throughput")
        if not decode:
            return None
        if result.params.concurrency > 1:
            return "no ceiling for a concurrent cell: the ceiling is modelled for one stream (batch 1)"
        if run.plan.url is not None and not self._simulate:
            return "no ceiling: the server is remote (--sglang-url / url), and its GPUs are not probed from here"
        bandwidth = self.bandwidth()
        if isinstance(bandwidth, str):
            return bandwidth
        if run.config is None or run.config.unavailable is not None:
            return ("no ceiling: the server's /server_info could not be read, so its tp and speculative settings "
                    "are unknown")
        info = run.config.info
        weights = self.weights(run, info)
        if isinstance(weights, str):
            return weights
        try:
            shape = decode_shape(info, context_tokens=_mean_context(result))
        except ValueError as exc:  # e.g. an ep_size that does not divide tp_size
            return f"no ceiling: the server's parallel layout is not one this plugin models ({exc})"
        step = decode_step_bytes(weights, shape)
        if step.total <= 0:
            return f"no ceiling: the bytes a decode step reads came to 0 ({weights.source})"
        per_step = tokens_per_step(result, speculative=speculative_algorithm(info) is not None)
        if per_step is None:
            return ("no ceiling: the server decodes speculatively but reported no speculative statistics "
                    "(spec_verify_ct), so the tokens per step are unknown")
        return DecodeCeiling(step=step, bandwidth=bandwidth, accept_length=per_step,
                             measured_tok_s=statistics.median(decode), bytes_exact=weights.exact,
                             bytes_source=weights.source, notes=weights.notes)

    def _prefill(self, run: VariantRun, result: Result) -> PrefillCeiling | str | None:
        """A prefill cell's compute ceiling, or why it has none; None for a cell that measured no prefill."""
        from pytest_sglang_perf.session.prefill_roofline import gemm_rate, prefill_ceiling

        if not result.values.get(PREFILL):
            return None
        if run.plan.url is not None and not self._simulate:
            return ("no prefill ceiling: the server is remote (--sglang-url / url), and its GPUs are not probed from "
                    "here")
        if not self._gpus.names:
            return "no GPU: a run on the CPU has no compute ceiling here (the GEMM rate is measured on GPUs only)"
        name = self._gpus.names[0]
        try:
            rate = gemm_rate(name, _table_gpu(name), self.probe, simulate=self._simulate)
            if isinstance(rate, str):
                return rate
            return prefill_ceiling(run, result, rate, self._settings.root, self._settings.model)
        except Exception as exc:  # a diagnostic never fails a measurement: its failure is reported as the reason
            return f"no prefill ceiling: computing it failed ({type(exc).__name__}: {exc})"

    def bandwidth(self) -> Bandwidth | str:
        """The simulated GPU's, the probe's measurement of this host's GPU, else its datasheet figure."""
        if not self._gpus.names:
            return NO_GPU
        name = self._gpus.names[0]
        table = _table_gpu(name)
        if self._simulate:
            if table is None:
                return f"no ceiling: the simulated GPU {name!r} is not in the GPU table"
            return _table_bandwidth(table, "simulated")
        measured = self.probe.bandwidth_for(name) if self.probe is not None else None
        if measured is not None and measured.read_gb_s > 0:
            return Bandwidth(measured.read_gb_s, "measured", name, _measured_detail(self.probe, name,
                                                                                   measured.method))
        if table is None:
            why = self.probe.skipped if self.probe is not None and self.probe.skipped else "the probe did not run"
            return (f"no ceiling: GPU {name!r} is not in the GPU table (sglang_facts/data/gpus.json) and its "
                    f"bandwidth was not measured ({why})")
        return _table_bandwidth(table, "datasheet")

    def weights(self, run: VariantRun, info: Mapping[str, Any]) -> WeightBytes | str:
        """The variant's model bytes (exact from a local checkpoint, else estimated from config.json) with its
        separate draft model's, found once per variant."""
        if run.name not in self._weights:
            found = self._find_weights(run, kv_dtype_bytes(info))
            self._weights[run.name] = found if isinstance(found, str) else self._with_draft_model(found, info)
        return self._weights[run.name]

    def _find_weights(self, run: VariantRun, kv_bytes: float | None) -> WeightBytes | str:
        from pytest_sglang_perf.roofline.model_source import find_model_weights

        if self._simulate and run.plan.model_config is not None:
            return _config_weights(run.plan.model_config, kv_bytes)
        model_path = flag_value(run.plan.command, "--model-path") or self._settings.model
        local = local_model_dir(model_path, self._settings.root)
        return find_model_weights(str(local) if local is not None else model_path, kv_dtype_bytes=kv_bytes)

    def _with_draft_model(self, weights: WeightBytes, info: Mapping[str, Any]) -> WeightBytes:
        """A separate draft model (EAGLE, EAGLE3, STANDALONE, an old-style NEXTN checkpoint): what each of its
        forwards reads (roofline/draft_weights.py); unknown, it is left out and said in the notes."""
        from pytest_sglang_perf.roofline.model_source import find_draft_weights

        path = draft_model_path(info)
        if path is None:
            return weights
        local = local_model_dir(path, self._settings.root)
        draft = find_draft_weights(str(local) if local is not None else path, weights)
        if isinstance(draft, str):
            return replace(weights, notes=(*weights.notes, f"draft model bytes unknown ({draft}): its layers are not "
                                                           "counted, only the target's LM head per draft forward"))
        return draft


def _table_bandwidth(gpu: Gpu, source: str) -> Bandwidth:
    return Bandwidth(gpu.read_bandwidth_gb_s, source, gpu.name,
                     f"{gpu.bandwidth_gb_s:.0f} GB/s datasheet x {gpu.read_efficiency:.2f} read efficiency")


def _measured_detail(probe: ProbeReport | None, name: str, method: str) -> str:
    """How the bandwidth was measured and the GPU it was measured on (what a baseline entry keeps of the probe)."""
    gpu = next((g for g in probe.gpus if g.name == name), None) if probe is not None else None
    if gpu is None:
        return method
    facts = [f"SM {gpu.sm}", f"{gpu.memory_mib} MiB", *([f"driver {gpu.driver}"] if gpu.driver else []),
             *([f"CUDA {gpu.cuda}"] if gpu.cuda else []),
             *([f"max SM clock {gpu.sm_clock_mhz} MHz"] if gpu.sm_clock_mhz else []),
             *([f"max memory clock {gpu.mem_clock_mhz} MHz"] if gpu.mem_clock_mhz else []),
             *([f"power limit {gpu.power_limit_w:g} W"] if gpu.power_limit_w else [])]
    return f"{method}; {', '.join(facts)}"


def _config_weights(config_file: Path, kv_bytes: float | None) -> WeightBytes | str:
    try:
        raw = json.loads(config_file.read_text(encoding="utf-8"))
        return weights_from_config(raw, source=str(config_file), kv_dtype_bytes=kv_bytes)
    except (OSError, ValueError, SGLangPerfError) as exc:
        return f"no ceiling: cannot count the bytes of {config_file} ({exc})"


def _table_gpu(name: str) -> Gpu | None:
    try:
        return find_gpu(name)
    except GpuTableError:
        return None


def tokens_per_step(result: Result, *, speculative: bool) -> float | None:
    """Decode tokens per decode step (one speculative round), the median over the samples: (completion tokens - 1)
    / spec_verify_ct, the first token being the prefill's (the `accept_length` metric, SGLang's own definition,
    counts it); 1 without speculative decoding; None when a speculative server reported no verify counts."""
    if not speculative:
        return 1.0
    found = [(s.completion_tokens - 1) / s.spec_verify_ct for s in result.samples
             if s.spec_verify_ct and s.completion_tokens > 1]
    return statistics.median(found) if found else None


def _mean_context(result: Result) -> int:
    """Tokens in the KV cache halfway through the decode: the prompt and half the completion (medians)."""
    prompt = statistics.median(s.prompt_tokens for s in result.samples) if result.samples else 0
    completion = statistics.median(s.completion_tokens for s in result.samples) if result.samples else 0
    return int(prompt + completion / 2)


def probe_text(report: ProbeReport | None) -> str | None:
    """`1x NVIDIA H200 (SM 9.0, driver 570.1): read 4321 GB/s (sum of 1 GiB, best of 20); torch 2.11.0`, or why
    it measured nothing; None when the probe did not run (a simulated run, a host without GPUs)."""
    if report is None:
        return None
    names: dict[str, int] = {}
    for gpu in report.gpus:
        names[gpu.name] = names.get(gpu.name, 0) + 1
    found = ", ".join(f"{count}x {name}" for name, count in names.items()) or "no GPU"
    measured = "; ".join(f"{m.gpu_name}: read {m.read_gb_s:.0f} GB/s ({m.method})" for m in report.bandwidth)
    why = f"; {report.skipped}" if report.skipped else ""
    return f"{found}{': ' + measured if measured else ''}{why} (via {report.via}, {report.seconds:.1f} s)"
