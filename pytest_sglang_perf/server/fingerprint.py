"""What a variant's server is, for comparing like with like: the model (and a hash of its config.json: the local
one, or on the simulator the one it reads, shipped for a known model id), the GPUs one server uses and the options
its command line sets as SGLang's parser resolves them.

The GPU count comes from the command line (tp x pp x dp, sglang_facts/resolved.py), not from the host, so a
`--tp-size 2` variant files its baselines as `2x<gpu>` even on a host with more GPUs.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from pytest_sglang_perf.gate.environment import hardware_label
from pytest_sglang_perf.gate.identity import ServerIdentity
from pytest_sglang_perf.server.plan import ServerPlan
from pytest_sglang_perf.sglang_facts.parsers import ArgParser
from pytest_sglang_perf.sglang_facts.resolved import gpus_used, resolved_args

_HASH_CHARS = 16


def config_hash(model_dir: Path | None) -> str | None:
    """sha256 of `<model_dir>/config.json` (first 16 hex digits); None when there is no such file."""
    return None if model_dir is None else config_file_hash(model_dir / "config.json")


def config_file_hash(config_file: Path) -> str | None:
    """sha256 of a config.json (first 16 hex digits); None when it cannot be read."""
    try:
        data = config_file.read_bytes()
    except OSError:
        return None
    return hashlib.sha256(data).hexdigest()[:_HASH_CHARS]


def local_model_dir(model_path: str, root: Path) -> Path | None:
    """The folder `--model-path` names when it is a local one with a config.json (relative to the rootdir, or
    as given); None for a hub id."""
    for candidate in (root / model_path, Path(model_path)):
        if (candidate / "config.json").is_file():
            return candidate
    return None


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
