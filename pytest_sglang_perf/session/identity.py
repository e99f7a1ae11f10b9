"""What a variant's server is, for comparing like with like, computed once when it is booted (or attached): the
model (and a hash of its config.json: the local one, or on the simulator the one it reads, shipped for a known model
id), the GPUs one server uses and the options its command line sets as SGLang's parser resolves them; and the
baseline file it files its cells under.

The GPU count comes from the command line (tp x pp x dp, sglang_facts/resolved.py), not from the host, so a
`--tp-size 2` variant files its baselines as `2x<gpu>` even on a host with more GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pytest_sglang_perf.gate.environment import environment_key, hardware_label
from pytest_sglang_perf.gate.identity import ServerIdentity
from pytest_sglang_perf.server.model_dir import config_file_hash, config_hash, local_model_dir
from pytest_sglang_perf.server.plan import ServerPlan, flag_value
from pytest_sglang_perf.sglang_facts.parsers import ArgParser
from pytest_sglang_perf.sglang_facts.resolved import gpus_used, resolved_args


@dataclass(frozen=True)
class ServerPlace:
    """Where a server's cells belong: its identity and the key of its baseline file."""

    identity: ServerIdentity
    key: str


def server_place(plan: ServerPlan, parser: ArgParser, *, model: str, root: Path, gpu_name: str | None,
                 simulated: bool) -> ServerPlace:
    """The server's identity and baseline file key (`2xrtx-a6000`, `cpu` in its hardware label)."""
    model_path = flag_value(plan.command, "--model-path") or model
    identity, hardware = server_identity(plan, parser, model=model, model_dir=local_model_dir(model_path, root),
                                         gpu_name=gpu_name)
    return ServerPlace(identity, environment_key(model=model, simulated=simulated, hardware=hardware))


def server_identity(plan: ServerPlan, parser: ArgParser, *, model: str, model_dir: Path | None,
                    gpu_name: str | None) -> tuple[ServerIdentity, str]:
    """The server's identity and its hardware label (`2xrtx-a6000`, `cpu`) for the baseline file key. The model's
    config hash is of the config.json the simulator reads (`plan.model_config`: a shipped one for a known model id),
    else of `model_dir`'s."""
    count = gpus_used(plan.args, parser)
    label = hardware_label(gpu_name, count)
    gpus = "cpu" if gpu_name is None else f"{count}x {gpu_name}"
    model_config = config_file_hash(plan.model_config) if plan.model_config is not None else config_hash(model_dir)
    identity = ServerIdentity(model=model, model_config=model_config, gpus=gpus,
                              args=resolved_args(plan.args, parser))
    return identity, label
