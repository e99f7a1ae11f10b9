"""The variants a run uses: the matrix as --sglang-variants selects it, with --sglang-url and --sglang-remote-gpu
applied, and the combinations that cannot work refused with a ConfigError naming the option and the fix."""

from __future__ import annotations

from dataclasses import replace

from pytest_sglang_perf.config.run_options import RunOptions
from pytest_sglang_perf.config.settings import ConfigError, Variant


def remote_variants(variants: tuple[Variant, ...], options: RunOptions) -> tuple[Variant, ...]:
    """The run's variants with --sglang-url and --sglang-remote-gpu applied; raises ConfigError when --sglang-url
    would name several variants' server, or when --sglang-boots would need to reboot a remote server."""
    if options.url is not None:
        if len(variants) != 1:
            names = ", ".join(v.name for v in variants)
            raise ConfigError(f"--sglang-url {options.url}: one running server runs one variant, and this run "
                              f"selects {len(variants)} ({names}); add --sglang-variants NAME (the variant whose "
                              "args the server runs), or give each variant its own url = \"...\" in the config")
        variants = (replace(variants[0], url=options.url),)
    if options.remote_gpu is not None:
        variants = tuple(replace(v, gpu=v.gpu or options.remote_gpu) if v.url else v for v in variants)
    pinned = [v.name for v in variants if v.gpu and not v.url]
    if pinned:
        raise ConfigError(f"variant {pinned[0]!r}: gpu = ... names the GPU of a remote server (url = ..., or "
                          "--sglang-url); this run boots it, and a booted server's GPU is the one nvidia-smi lists: "
                          "drop gpu, or give the url of the server it runs on")
    remote = [v.name for v in variants if v.url]
    if remote and options.update_baselines and options.boots > 1:
        raise ConfigError(f"--sglang-boots {options.boots}: the remote server of {', '.join(remote)} is not booted by "
                          "this run, so it cannot be booted again; record it with one boot (drop --sglang-boots)")
    return variants
