"""The Markdown report's conditions section: what each cell was measured under (the results document's `client`,
`host` and `gpu` records: measurement/client_load.py, host_load.py, gpu_conditions.py), and why a disturbed one
did not fail or was not recorded (gate/conditions.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_sglang_perf.measurement.client_load import ClientLoad
from pytest_sglang_perf.measurement.gpu_conditions import GpuCondition
from pytest_sglang_perf.measurement.host_load import HostLoad
from pytest_sglang_perf.outputs.markdown_text import code, table, text


def conditions_section(cells: Sequence[Mapping[str, Any]]) -> list[str]:
    """`## Conditions` with a row per cell that recorded any (a disturbed cell's: its re-measure's, which decided);
    empty when none did."""
    rows = [row for row in (_row(cell) for cell in cells) if row is not None]
    if not rows:
        return []
    header = ("test", "variant", "client", "host", "GPUs", "disturbed")
    return ["## Conditions", "", "What each cell was measured under; a *disturbed* cell's regression is "
            "inconclusive and its recording refused (docs/conditions.md).", "", *table(header, rows, "llllll")]


def _row(cell: Mapping[str, Any]) -> list[str] | None:
    disturbed = cell.get("disturbed")
    again = cell.get("confirmation")
    source = again if disturbed and isinstance(again, Mapping) else cell  # the reason is the re-measure's
    client = _read(ClientLoad.from_dict, source.get("client"))
    host = _read(HostLoad.from_dict, source.get("host"))
    gpus = [gpu for gpu in (_read(GpuCondition.from_dict, item) for item in source.get("gpu") or ()) if gpu]
    if client is None and host is None and not gpus:
        return None
    return [code(cell.get("test_id"), in_table=True), code(cell.get("variant"), in_table=True),
            text(client.describe()) if client else "",
            text(host.describe().removeprefix("host: ")) if host else "",
            "; ".join(text(gpu.describe()) for gpu in gpus),
            f"**{text(disturbed)}** (the re-measure's conditions)" if disturbed else ""]


def _read(parse: Any, record: Any) -> Any:
    """A record read back, or None when it is absent or not what this version writes."""
    if not isinstance(record, Mapping):
        return None
    try:
        return parse(record)
    except (KeyError, TypeError, ValueError):
        return None
