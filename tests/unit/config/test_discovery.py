"""Which configuration a command run anywhere in a project uses (config/discovery.py): the nearest directory from
the current one up that holds one, sglang-perf.toml before pyproject.toml, an explicit file above all."""

from __future__ import annotations

from pathlib import Path

from pytest_sglang_perf.config.discovery import find_config_dir, load_project_settings


def _project(root: Path) -> Path:
    (root / "pyproject.toml").write_text('[tool.sglang_perf]\nmodel = "from-pyproject"\n')
    (root / "tests" / "perf").mkdir(parents=True)
    return root / "tests" / "perf"


def test_a_subdirectory_finds_the_projects_configuration_above_it(tmp_path: Path) -> None:
    deep = _project(tmp_path)
    assert find_config_dir(deep) == tmp_path
    settings = load_project_settings(deep)
    assert settings is not None and settings.model == "from-pyproject"


def test_a_nearer_configuration_wins_and_sglang_perf_toml_before_pyproject(tmp_path: Path) -> None:
    deep = _project(tmp_path)
    (deep / "pyproject.toml").write_text("[tool.other]\nx = 1\n")  # no [tool.sglang_perf]: not a configuration
    (deep / "sglang-perf.toml").write_text('model = "from-toml"\n')
    settings = load_project_settings(deep)
    assert find_config_dir(deep) == deep and settings is not None and settings.model == "from-toml"


def test_an_explicit_file_is_read_wherever_the_command_runs(tmp_path: Path) -> None:
    other = tmp_path / "elsewhere.toml"
    other.write_text('model = "explicit"\n')
    settings = load_project_settings(_project(tmp_path), other)
    assert settings is not None and settings.model == "explicit"

