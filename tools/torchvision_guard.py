"""Keep `torchvision` from importing in this venv, in every process it starts (SGLang spawns its schedulers).

PyPI's torchvision is linked against CUDA torch; beside the CPU build of torch, `import torchvision` fails
(`operator torchvision::nms does not exist`), and SGLang imports it through multimodal config modules even for a
text model. This tool copies itself into the current interpreter's site-packages as a module and adds a `.pth`
file that activates it at startup: a `sys.meta_path` finder that answers every `torchvision*` import with an
inert module (any attribute is a placeholder class; calling one raises a clear error). The root module says
`__version__ = "0.0.0+inert"`: transformers finds a torchvision without a distribution and reads the version from
the module (it fails on none), and so every version gate turns torchvision's features off.

    python tools/torchvision_guard.py            # install or refresh (idempotent: no write when up to date)
    python tools/torchvision_guard.py --check    # exit 1 unless installed and up to date
    python tools/torchvision_guard.py --remove   # uninstall

Set SGLANG_PERF_TORCHVISION_GUARD=0 to disable the finder without uninstalling.
"""

from __future__ import annotations

import argparse
import importlib.abc
import importlib.machinery
import os
import sys
import sysconfig
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

MODULE_NAME = "sglang_perf_torchvision_guard"
PTH_NAME = "sglang_perf_torchvision_guard.pth"
PTH_LINE = f"import {MODULE_NAME}; {MODULE_NAME}.activate()\n"
GUARDED = "torchvision"
INERT_VERSION = "0.0.0+inert"
DISABLE_VAR = "SGLANG_PERF_TORCHVISION_GUARD"


def _refuse(what: str) -> NoReturn:
    raise RuntimeError(f"{what}: torchvision is disabled in this venv by tools/torchvision_guard.py "
                       f"(set {DISABLE_VAR}=0 to lift it, with a torchvision build that matches torch)")


class _Placeholder(type):
    """A stand-in for any torchvision name: attributes are placeholders too, calls refuse."""

    def __getattr__(cls, name: str) -> type:
        if name.startswith("__"):
            raise AttributeError(name)
        return _placeholder(f"{cls.__qualname__}.{name}", cls.__module__)

    def __call__(cls, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse(f"{cls.__module__}.{cls.__qualname__}()")


def _placeholder(qualname: str, module: str) -> type:
    return _Placeholder(qualname.rpartition(".")[2], (), {"__qualname__": qualname, "__module__": module})


class InertModule(types.ModuleType):
    def __getattr__(self, name: str) -> type:
        if name.startswith("__"):
            raise AttributeError(name)
        return _placeholder(name, self.__name__)


class _InertLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return InertModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__path__ = []
        if module.__name__ == GUARDED:
            module.__version__ = INERT_VERSION  # type: ignore[attr-defined]


class TorchvisionFinder(importlib.abc.MetaPathFinder):
    """Answers `torchvision` and its submodules with inert packages, ahead of every other finder."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None,
                  ) -> importlib.machinery.ModuleSpec | None:
        if fullname != GUARDED and not fullname.startswith(GUARDED + "."):
            return None
        return importlib.machinery.ModuleSpec(fullname, _InertLoader(), is_package=True)


def activate() -> None:
    """Put the finder first on sys.meta_path (once), unless SGLANG_PERF_TORCHVISION_GUARD=0."""
    if os.environ.get(DISABLE_VAR, "1").strip().lower() in ("0", "false", "no", "off"):
        return
    if not any(isinstance(finder, TorchvisionFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, TorchvisionFinder())


def _targets() -> tuple[Path, Path]:
    site = Path(sysconfig.get_paths()["purelib"])
    return site / f"{MODULE_NAME}.py", site / PTH_NAME


def _wanted() -> tuple[bytes, bytes]:
    return Path(__file__).read_bytes(), PTH_LINE.encode()


def is_installed() -> bool:
    module, pth = _targets()
    source, line = _wanted()
    return module.is_file() and pth.is_file() and module.read_bytes() == source and pth.read_bytes() == line


def install() -> bool:
    """Write the module and the .pth file into site-packages; False when they were already up to date."""
    if is_installed():
        return False
    module, pth = _targets()
    source, line = _wanted()
    module.write_bytes(source)
    pth.write_bytes(line)  # after the module, so a process started in between never imports a missing module
    return True


def remove() -> bool:
    removed = False
    for path in reversed(_targets()):
        if path.exists():
            path.unlink()
            removed = True
    return removed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--check", action="store_true", help="exit 1 unless installed and up to date")
    action.add_argument("--remove", action="store_true", help="uninstall the guard from this venv")
    args = parser.parse_args(argv)
    where = _targets()[1].parent
    if args.check:
        ok = is_installed()
        print(f"torchvision guard {'installed' if ok else 'NOT installed'} in {where}")
        return 0 if ok else 1
    if args.remove:
        print(f"torchvision guard {'removed from' if remove() else 'was not installed in'} {where}")
        return 0
    print(f"torchvision guard {'installed in' if install() else 'up to date in'} {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
