"""Build the `tox -e sglang-cpu` environment completely, whether tox runs its tests or not.

tox installs `deps` and the package through `install_command` when it builds an environment, also under
`--notest`, but it runs `commands_pre` only before tests. So every step that makes the environment usable lives
here and runs from `install_command`:

    python tools/sglang_cpu_env.py install {opts} {packages}   # pip install, then finish
    python tools/sglang_cpu_env.py finish                      # the steps after any install (idempotent)

`finish` installs SGLang without its (CUDA) dependencies from requirements/sglang-cpu-nodeps.txt, removes the
CUDA-linked torchvision/torchaudio/torchcodec that the CPU set pulls in, and installs the torchvision guard
(tools/torchvision_guard.py). Each step is cheap when already done, so `commands_pre` runs `finish` again to repair
an environment that was changed by hand.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
NODEPS = HERE.parent / "requirements" / "sglang-cpu-nodeps.txt"
CUDA_LINKED = ("torchvision", "torchaudio", "torchcodec")


def _run(args: Sequence[str]) -> None:
    subprocess.run([sys.executable, *args], check=True)


def finish() -> None:
    _run(["-m", "pip", "install", "--quiet", "--no-deps", "-r", str(NODEPS)])
    _run(["-m", "pip", "uninstall", "--quiet", "-y", *CUDA_LINKED])
    _run([str(HERE / "torchvision_guard.py")])


def main(argv: Sequence[str]) -> int:
    if argv[:1] == ["install"] and len(argv) > 1:
        _run(["-I", "-m", "pip", "install", *argv[1:]])
        finish()
        return 0
    if list(argv) == ["finish"]:
        finish()
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
