"""tools/sglang_versions.py: what it reads from a wheel's metadata and how it writes a table (the dump of a real
wheel's parser needs the sglang-cpu environment: the shipped tables are its output, checked in
tests/unit/sglang_facts/test_versions.py)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[3]


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sglang_versions", ROOT / "tools" / "sglang_versions.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("sglang_versions", module)
    spec.loader.exec_module(module)
    return module


METADATA = """Metadata-Version: 2.4
Name: sglang
Version: 0.5.19
Requires-Dist: tokenizers==0.22.2
Requires-Dist: transformers==5.12.1
Requires-Dist: transformers-stream-generator; extra == "x"
Requires-Dist: torch==2.9.1
"""


def test_the_releases_own_pins_are_read_from_its_metadata() -> None:
    tool = _tool()
    assert tool._requires(METADATA, "transformers") == "==5.12.1"
    assert tool._requires(METADATA, "tokenizers") == "==0.22.2"
    assert tool._requires(METADATA, "huggingface-hub") is None
    assert tool._requires("Requires-Dist: tokenizers (<=0.23.0,>=0.22.0)\n", "tokenizers") == "<=0.23.0,>=0.22.0"


def test_a_table_is_written_one_option_a_line_and_reads_back_the_same() -> None:
    tool = _tool()
    table = {"prog": "sglang serve", "sglang_version": "0.5.19",
             "options": [{"flags": ["--a"], "dest": "a", "default": None}, {"flags": ["--b"], "dest": "b"}]}
    text = tool.dump(table)
    assert json.loads(text) == table
    assert len(text.splitlines()) == 4


def test_the_version_is_read_from_the_wheels_name() -> None:
    tool = _tool()
    assert tool.wheel_version(Path("sglang-0.5.12.post1-cp311-cp311-manylinux_2_34_x86_64.whl")) == "0.5.12.post1"
