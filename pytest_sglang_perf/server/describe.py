"""Text about the servers themselves: what each variant's server really ran, and what its boot cost."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pytest_sglang_perf.server.effective import EffectiveConfig, Status
from pytest_sglang_perf.server.startup import GraphUse, StartupFacts
from pytest_sglang_perf.wrapping import wrap_lines

WARNING = "WARNING"


def verdict_line(config: EffectiveConfig) -> str:
    if config.problems:
        return f"effective configuration DIFFERS from the request ({len(config.problems)} finding(s))"
    if config.duplicate:
        return "effective configuration: as requested, but the same as another variant's"
    verified = sum(1 for outcome in config.flags if outcome.status is Status.OK)
    unconfirmed = f"; {len(config.notes)} note(s)" if config.notes else ""  # flags that cannot be confirmed
    return f"effective configuration: ok ({verified} requested flag(s) verified against /server_info{unconfirmed})"


def config_lines(config: EffectiveConfig) -> list[str]:
    """The verdict, what ran, then each warning and note (for the live terminal and the summary)."""
    lines = [verdict_line(config)]
    lines += [f"  {what}: {how}" for what, how in config.ran]
    lines += [f"  {WARNING}: {text}" for text in config.warnings]
    lines += [f"  note: {text}" for text in config.notes]
    lines += [f"  judged with: {config.facts_note}"] if config.facts_note else []
    return lines


def config_brief(config: EffectiveConfig) -> str:
    """The effective configuration in a few words, for the one-line boot summary: `config ok`, `config DIFFERS
    (1 finding(s))`, `config NOT verified`, `config: measures nothing new`."""
    if config.unavailable:
        return "config NOT verified"
    if config.problems:
        return f"config DIFFERS ({len(config.problems)} finding(s))"
    if config.duplicate:
        return "config: measures nothing new"
    notes = f", {len(config.notes)} note(s)" if config.notes else ""
    return f"config ok{notes}"


def ready_line(config: EffectiveConfig, facts: StartupFacts | None, boot_seconds: float, simulated: bool,
               log_name: str) -> str:
    """A booted server in one line: `ready in 61.5 s (SIMULATED; graphs 12.40 s; config ok; log default.log)`."""
    parts = ["SIMULATED"] if simulated else []
    if facts is not None and facts.graph_capture_seconds is not None:
        parts.append(f"graphs {facts.graph_capture_seconds:.2f} s")
    parts += [config_brief(config), f"log {log_name}"]
    return f"ready in {boot_seconds:.1f} s ({'; '.join(parts)})"


def failure_lines(config: EffectiveConfig, facts: StartupFacts | None, boot_seconds: float | None,
                  log: str) -> list[str]:
    """What a failing test's report says about its server: the verdict and its findings (they may explain the
    numbers), the boot costs and the log; what ran in full is in the summary's servers section."""
    lines = [f"server: {verdict_line(config)}"]
    lines += [f"  {WARNING}: {text}" for text in config.warnings]
    if facts is not None:
        lines.append(f"  startup: {startup_text(facts, boot_seconds)}")
    lines.append(f"  log: {log}")
    return wrap_lines(lines)


def startup_text(facts: StartupFacts, boot_seconds: float | None) -> str:
    """One line of boot costs: `boot 183.2 s, load_weight 40.1 s, cuda graphs 35.0 s, KV cache ...`."""
    parts = [] if boot_seconds is None else [f"boot {boot_seconds:.1f} s"]
    if facts.load_weight is not None:
        parts.append(f"load_weight {facts.load_weight:.2f} s")
    if facts.graph_capture_seconds is not None:
        parts.append(f"cuda graphs {facts.graph_capture_seconds:.2f} s")
    if facts.kv_cache_tokens is not None:
        size = f" ({facts.kv_cache_gb:.2f} GB)" if facts.kv_cache_gb is not None else ""
        parts.append(f"KV cache {facts.kv_cache_tokens} tokens{size}")
    for name in ("max_total_num_tokens", "max_running_requests", "context_len", "chunked_prefill_size"):
        value = getattr(facts, name)
        if value is not None:
            parts.append(f"{name} {value}")
    for name in ("available_gpu_mem", "available_cpu_mem"):
        value = getattr(facts, name)
        if value is not None:
            parts.append(f"{name} {value:.2f} GB")
    return ", ".join(parts) if parts else "SGLang logged no startup facts"


def graph_use_text(use: GraphUse) -> str:
    """`prefill batches 4/4, decode batches 7/7 with a graph` (SGLang's `cuda graph: True|False` per batch line)."""
    prefill, decode = use.prefill_true + use.prefill_false, use.decode_true + use.decode_false
    return (f"prefill batches {use.prefill_true}/{prefill}, decode batches {use.decode_true}/{decode} ran with a "
            "graph (SGLang's batch log lines)")


def server_summary_lines(configs: Mapping[str, EffectiveConfig], facts: Mapping[str, StartupFacts],
                         boot_seconds: Mapping[str, float], simulated: bool,
                         uses: Mapping[str, GraphUse] | None = None, *, brief: bool = False,
                         remote: Mapping[str, str] | None = None,
                         reused: Mapping[str, str] | None = None) -> list[str]:
    """The summary's servers section: per variant, the effective configuration, the startup costs and how
    many batches really ran with a graph. `brief` (pytest's default verbosity): a variant whose server ran as
    requested gets its verdict line and its warnings (a duplicate's warning is in pytest's warnings summary
    already); one whose server differs from the request, or could not be verified, gets the full report (what
    ran is what the user must read then)."""
    tag = " (SIMULATED)" if simulated else ""
    remote, reused = remote or {}, reused or {}
    lines: list[str] = []
    for name, config in configs.items():
        first, *rest = config_lines(config)
        lines.append(f"variant {name}{tag}: {first}")
        if name in reused:
            lines.append(f"  server: {reused[name]}; its boot was not measured by this run")
        if brief and not (config.problems or config.unavailable):  # the rest is the -v report
            lines += _brief_rest(config, rest)
            continue
        lines += rest
        if name in reused:
            pass
        elif name in remote:
            lines.append(f"  startup: not observed: the server at {remote[name]} is remote (not booted by this run)")
        elif name in facts:
            lines.append(f"  startup: {startup_text(facts[name], boot_seconds.get(name))}")
        if uses and name in uses:
            lines.append(f"  runtime: {graph_use_text(uses[name])}")
    return wrap_lines(lines)


def _brief_rest(config: EffectiveConfig, rest: Sequence[str]) -> list[str]:
    if config.duplicate:
        return []
    return [line for line in rest if line.startswith((f"  {WARNING}: ", "  note: "))]


def strict_failure(variant: str, config: EffectiveConfig) -> str:
    """Why --sglang-strict-flags fails every test of a variant."""
    return "\n".join([
        f"sglang-perf: variant {variant!r}: the server did not run what was requested (--sglang-strict-flags):",
        *(f"  {text}" for text in config.problems),
        "Fix the variant's flags (or drop --sglang-strict-flags to only warn).",
    ])


def warning_text(variant: str, config: EffectiveConfig) -> str:
    """The warning every test of a variant with findings carries."""
    return f"variant {variant!r}: " + "; ".join(config.warnings)
