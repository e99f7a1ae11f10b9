"""What the client benchmarks share: a server subprocess (the script itself with --serve) pinned to one core, the
clients pinned to another, and the script's command line."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager


def pin(core: int) -> None:
    """This process on the core-th CPU it may use (when there are two or more)."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) >= 2:
        os.sched_setaffinity(0, {cores[core]})


@contextmanager
def served(script: str) -> Iterator[tuple[int, str]]:
    """`python script --serve` running (it prints its port first): its pid and URL; stopped afterwards."""
    proc = subprocess.Popen([sys.executable, script, "--serve"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = proc.stdout.readline().strip()
        if not port.isdigit():
            raise RuntimeError(f"the benchmark server did not start (exit code {proc.poll()})")
        yield proc.pid, f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def script(doc: str | None, serve: Callable[[], None], main: Callable[[argparse.Namespace], None], serve_help: str,
           options: Callable[[argparse.ArgumentParser], None] | None = None) -> None:
    """The benchmark's command line: `--serve` runs its server (internal), nothing runs the benchmark (with the
    arguments that `options` adds)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", action="store_true", help=serve_help)
    if options is not None:
        options(parser)
    args = parser.parse_args()
    if args.serve:
        serve()
    else:
        main(args)
