"""The project's perf configuration: found, read and validated once into frozen Settings.

Sources, first found wins: `--sglang-config PATH`, `sglang-perf.toml` in the rootdir, `[tool.sglang_perf]`
in the rootdir's `pyproject.toml`. Every bad value raises ConfigError naming the file, key and a fix.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar
from urllib.parse import urlsplit

from pytest_sglang_perf.config.conditions import ConditionLimits, parse_limits
from pytest_sglang_perf.config.reader import ConfigError as ConfigError  # re-exported: callers import it from here
from pytest_sglang_perf.config.reader import Reader, expect_table, string
from pytest_sglang_perf.config.request import GateSettings, RequestDefaults, parse_gate, parse_request
from pytest_sglang_perf.config.units import parse_duration, parse_grace, parse_latency, parse_percent
from pytest_sglang_perf.measurement.metrics import METRICS

T = TypeVar("T")

DEFAULT_STARTUP_TIMEOUT = 1800.0
DEFAULT_STOP_GRACE = 5.0
"""Seconds a stopping server gets after SIGTERM before SIGKILL (short: a CI job's cancel window is short)."""
_VARIANT_NAME = re.compile(r"^[A-Za-z0-9_.]+$")
_PLUGIN_OWNED_FLAGS = {
    "--host": "the plugin binds every server to 127.0.0.1",
    "--port": "the plugin picks a free port for every server",
    "--model-path": "set the model with the `model` key",
    "--model": "set the model with the `model` key",
}
_TOP_KEYS = {
    "model", "args", "variants", "tolerance", "startup_timeout", "server_command", "request",
    "baseline_dir", "env", "simulate", "log_dir", "gate", "stop_grace", "baseline_max_age", "conditions",
}


_NO_ARGS: tuple[str, ...] = ()
_NO_ENV: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True)
class Variant:
    name: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    url: str | None = None
    """A running server to measure instead of booting one (`url = "http://host:30000"`, or --sglang-url)."""
    gpu: str | None = None
    """The GPU model of the remote server at `url` (nvidia-smi's name; its baselines are keyed by it)."""


@dataclass(frozen=True)
class SimulateSettings:
    model_path: Path | None = None
    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class Settings:
    source: str
    """Where the configuration came from, e.g. 'pyproject.toml [tool.sglang_perf]'."""
    root: Path
    model: str
    args: tuple[str, ...] = ()
    variants: tuple[Variant, ...] = (Variant("default"),)
    tolerances: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT
    stop_grace: float = DEFAULT_STOP_GRACE
    server_command: tuple[str, ...] | None = None
    request: RequestDefaults = field(default_factory=RequestDefaults)
    gate: GateSettings = field(default_factory=GateSettings)
    conditions: ConditionLimits = field(default_factory=ConditionLimits)
    """When a measurement's conditions make a regression inconclusive (gate/conditions.py)."""
    baseline_dir: Path = Path("baselines")
    baseline_max_age: float | None = None
    """Seconds after which a baseline entry is reported as old (`baseline_max_age = "90d"`); None: never."""
    log_dir: Path | None = None
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    simulate: SimulateSettings = SimulateSettings()
    path: Path | None = None
    """The configuration file (None for settings built in code)."""

    def tolerance(self, metric: str) -> float:
        return self.tolerances.get(metric, METRICS[metric].default_tolerance)

    def variant(self, name: str) -> Variant:
        for variant in self.variants:
            if variant.name == name:
                return variant
        raise KeyError(name)

    def select(self, names: tuple[str, ...] | None) -> tuple[Variant, ...]:
        """The variants a run uses, in matrix order when `names` is None (`--sglang-variants` otherwise)."""
        if names is None:
            return self.variants
        known = [v.name for v in self.variants]
        for name in names:
            if name not in known:
                raise ConfigError(f"--sglang-variants: unknown variant {name!r}; variants in {self.source}: "
                                  f"{', '.join(known)}")
        return tuple(self.variant(name) for name in names)


def find_config(rootdir: Path, explicit: Path | None) -> tuple[Path, Mapping[str, Any], str] | None:
    """(path, table, source label) of the configuration to use, or None when the project has none."""
    if explicit is not None:
        return _read_explicit(explicit)
    candidate = rootdir / "sglang-perf.toml"
    if candidate.is_file():
        return candidate, _read_toml(candidate), "sglang-perf.toml"
    pyproject = rootdir / "pyproject.toml"
    if pyproject.is_file():
        table = _read_toml(pyproject).get("tool", {}).get("sglang_perf")
        if table is not None:
            return pyproject, expect_table(table, "pyproject.toml", "[tool.sglang_perf]"), _PYPROJECT
    return None


_PYPROJECT = "pyproject.toml [tool.sglang_perf]"
_NESTED = " [tool.sglang_perf]"


def table_location(source: str, table: str) -> str:
    """Sub-table `table` as the user's file spells its header, and the file: "[tool.sglang_perf.simulate] in
    pyproject.toml" (any file with a [tool.sglang_perf] table), "[simulate] in sglang-perf.toml"."""
    if source.endswith(_NESTED):
        return f"[tool.sglang_perf.{table}] in {source.removesuffix(_NESTED)}"
    return f"[{table}] in {source}"


def _read_explicit(path: Path) -> tuple[Path, Mapping[str, Any], str]:
    if not path.is_file():
        raise ConfigError(f"--sglang-config {path}: no such file; pass the path of a sglang-perf.toml "
                          "or of a pyproject.toml with a [tool.sglang_perf] table")
    data = _read_toml(path)
    nested = data.get("tool", {}).get("sglang_perf") if isinstance(data.get("tool"), dict) else None
    if nested is not None:
        return path, expect_table(nested, str(path), "[tool.sglang_perf]"), f"{path} [tool.sglang_perf]"
    if path.name == "pyproject.toml":
        raise ConfigError(f"{path} has no [tool.sglang_perf] table; add one (see docs/usage/configuration.md)")
    return path, data, str(path)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}; fix the syntax at that position") from None


def load_settings(rootdir: Path, explicit: Path | None = None) -> Settings | None:
    found = find_config(rootdir, explicit)
    if found is None:
        return None
    path, table, source = found
    return dataclasses.replace(parse_settings(table, source=source, root=path.parent), path=path)


def variant_line(path: Path, name: str) -> int | None:
    """The 1-based line that defines variant `name` in a configuration file (after a `variants` header)."""
    definition = re.compile(rf"""^\s*["']?{re.escape(name)}["']?\s*=""")
    in_variants = False
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    table = re.compile(rf"""variants\.["']?{re.escape(name)}["']?\s*\]""")
    for number, line in enumerate(lines, start=1):
        if line.lstrip().startswith("["):
            if table.search(line):
                return number
            in_variants = "variants" in line
        elif in_variants and definition.match(line):
            return number
    return None


def parse_settings(table: Mapping[str, Any], *, source: str, root: Path) -> Settings:
    reader = Reader(source)
    reader.check_keys(table, _TOP_KEYS, "")
    model = reader.get(table, "model", string, required=True)
    return Settings(
        source=source,
        root=root,
        model=model,
        args=reader.get(table, "args", _args, default=()),
        variants=_variants(reader, table.get("variants")),
        tolerances=_tolerances(reader, table.get("tolerance")),
        startup_timeout=reader.get(table, "startup_timeout", parse_duration, default=DEFAULT_STARTUP_TIMEOUT),
        stop_grace=reader.get(table, "stop_grace", parse_grace, default=DEFAULT_STOP_GRACE),
        server_command=reader.get(table, "server_command", _command, default=None),
        request=parse_request(reader, table.get("request")),
        gate=parse_gate(reader, table.get("gate")),
        conditions=_conditions(reader, table.get("conditions")),
        baseline_dir=root / reader.get(table, "baseline_dir", string, default="baselines"),
        baseline_max_age=reader.get(table, "baseline_max_age", parse_duration, default=None),
        log_dir=_optional_dir(root, reader.get(table, "log_dir", string, default=None)),
        env=reader.get(table, "env", _env, default=MappingProxyType({})),
        simulate=_simulate(reader, table.get("simulate"), root),
    )


def _string_list(value: object, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"expected a list of strings ({what}), got {value!r}")
    return tuple(value)


def _args(value: object) -> tuple[str, ...]:
    args = _string_list(value, 'e.g. ["--tp-size", "2"]')
    for arg in args:
        flag = arg.split("=", 1)[0]
        if flag in _PLUGIN_OWNED_FLAGS:
            raise ValueError(f"remove {flag}: {_PLUGIN_OWNED_FLAGS[flag]}")
    return args


def _command(value: object) -> tuple[str, ...]:
    command = _string_list(value, 'e.g. ["python", "-m", "sglang.launch_server"]')
    if not command:
        raise ValueError("must name a program, e.g. [\"python\", \"-m\", \"sglang.launch_server\"]")
    return command


def _env(value: object) -> Mapping[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ValueError(f"expected a table of strings, e.g. {{ NCCL_NVLS_ENABLE = \"1\" }}, got {value!r}")
    return MappingProxyType(dict(value))


def _optional_dir(root: Path, value: str | None) -> Path | None:
    return None if value is None else root / value


def _variants(reader: Reader, value: object) -> tuple[Variant, ...]:
    if value is None:
        return (Variant("default"),)
    if not isinstance(value, dict) or not value:
        raise reader.fail("variants", "expected a table of named variants, e.g. default = [] and "
                          "prefill_graph = [\"--cuda-graph-backend-prefill\", \"breakable\"]")
    return tuple(_variant(reader, name, spec) for name, spec in value.items())


def _variant(reader: Reader, name: str, spec: object) -> Variant:
    key = f"variants.{name}"
    if not _VARIANT_NAME.match(name):
        raise reader.fail(key, "variant names may use letters, digits, '_' and '.' only (they end test ids "
                          "and baseline keys); rename it, e.g. prefill_graph")
    if isinstance(spec, list):
        return Variant(name, reader.get({name: spec}, name, _args, prefix="variants."))
    if isinstance(spec, dict):
        reader.check_keys(spec, {"args", "env", "url", "gpu"}, key + ".")
        args = reader.get(spec, "args", _args, default=_NO_ARGS, prefix=key + ".")
        env = reader.get(spec, "env", _env, default=_NO_ENV, prefix=key + ".")
        url = reader.get(spec, "url", server_url, default=None, prefix=key + ".")
        gpu = reader.get(spec, "gpu", string, default=None, prefix=key + ".")
        return Variant(name, args, env, url, gpu)
    raise reader.fail(key, "expected a list of flags or a table with args, env, url and gpu, e.g. "
                      f"{name} = [\"--enable-single-batch-overlap\"]")


def server_url(value: object) -> str:
    """A running server's base URL, `http(s)://host:port` (a trailing slash dropped)."""
    text = string(value).strip().rstrip("/")
    parsed = urlsplit(text)
    if parsed.scheme not in ("http", "https") or not parsed.hostname or parsed.path or parsed.query:
        raise ValueError(f"expected a server's base URL such as \"http://10.0.0.5:30000\", got {value!r}")
    if parsed.username is not None or parsed.password is not None:
        raise ValueError("a server URL with user:password would be shown in every report; drop it (the API key "
                         "comes from SGLANG_PERF_API_KEY)")
    try:
        parsed.port  # noqa: B018 (raises on a port that is not a number)
    except ValueError:
        raise ValueError(f"expected a server's base URL such as \"http://10.0.0.5:30000\", got {value!r}") from None
    return text


def _conditions(reader: Reader, value: object) -> ConditionLimits:
    if value is None:
        return ConditionLimits()
    table = expect_table(value, reader.source, "conditions")
    reader.check_keys(table, set(ConditionLimits().to_dict()), "conditions.")
    return parse_limits(table, parse_percent, parse_duration, parse_latency,
                        lambda t, key, parse, default: reader.get(t, key, parse, default=default, prefix="conditions."))


def _tolerances(reader: Reader, value: object) -> Mapping[str, float]:
    if value is None:
        return MappingProxyType({})
    table = expect_table(value, reader.source, "tolerance")
    reader.check_keys(table, set(METRICS), "tolerance.")
    return MappingProxyType({name: reader.get(table, name, parse_percent, prefix="tolerance.") for name in table})


def _simulate(reader: Reader, value: object, root: Path) -> SimulateSettings:
    if value is None:
        return SimulateSettings()
    table = expect_table(value, reader.source, "simulate")
    reader.check_keys(table, {"model_path", "args"}, "simulate.")
    model_path = reader.get(table, "model_path", string, default=None, prefix="simulate.")
    return SimulateSettings(
        model_path=None if model_path is None else root / model_path,
        args=reader.get(table, "args", _string_list_any, default=(), prefix="simulate."),
    )


def _string_list_any(value: object) -> tuple[str, ...]:
    return _string_list(value, 'e.g. ["--sim-decode-tok-s", "55"]')
