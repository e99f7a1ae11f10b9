"""The dependency floors hold: requirements/floors.txt pins exactly pyproject.toml's `>=` floors, and the tox env
`floors` (run by CI) installs that file, so the floors CI proves are the floors users are promised.

pyproject.toml says the lowest version of each dependency the plugin works with; `tox -e floors` installs those
lowest versions together and runs the plugin's tests on them. If the two files could drift, a raised floor would go
untested, or a floor would be claimed that nothing ever ran: raise both together.
"""

from __future__ import annotations

import configparser
import os
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
FLOORS_FILE = REPO / "requirements" / "floors.txt"
FROM_DEV = ("pytest-xdist",)
"""What the tests need beyond the dependencies (the dev extra's), whose floors the env proves too."""

Floors = dict[str, tuple[Version, str]]
"""Distribution name -> (its floor, its environment marker as text, '' for none)."""


def _floor(requirement: Requirement) -> Version:
    """The one `>=` bound of a requirement (a floor that is no `>=` bound is not a floor the env can pin)."""
    bounds = [spec for spec in requirement.specifier if spec.operator == ">="]
    assert len(bounds) == 1, f"{requirement}: give it exactly one `>=` floor"
    return Version(bounds[0].version)


def _entry(requirement: Requirement, floor: Version) -> tuple[str, tuple[Version, str]]:
    return requirement.name.lower(), (floor, str(requirement.marker or ""))


def _declared() -> Floors:
    """pyproject.toml's floors: every runtime dependency, and the dev extra's FROM_DEV."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    runtime = [Requirement(text) for text in project["dependencies"]]
    dev = [Requirement(text) for text in project["optional-dependencies"]["dev"]]
    return dict(_entry(req, _floor(req)) for req in [*runtime, *(r for r in dev if r.name in FROM_DEV)])


def _pinned() -> Floors:
    """requirements/floors.txt: one `name==version` per line (comments and blank lines aside)."""
    pins: Floors = {}
    for line in FLOORS_FILE.read_text().splitlines():
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        requirement = Requirement(text)
        specs = list(requirement.specifier)
        assert len(specs) == 1 and specs[0].operator == "==", f"{FLOORS_FILE.name}: {text!r} is no `==` pin"
        name, entry = _entry(requirement, Version(specs[0].version))
        assert name not in pins, f"{FLOORS_FILE.name}: {name} pinned twice"
        pins[name] = entry
    return pins


def test_the_floors_file_pins_exactly_the_floors_of_pyproject() -> None:
    assert _pinned() == _declared()


def test_the_dev_extra_asks_no_other_floor_of_a_dependency() -> None:
    """The dev extra names pytest-benchmark again (with its histogram extra): its floor is the dependency's."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = _declared()
    for text in project["optional-dependencies"]["dev"]:
        requirement = Requirement(text)
        if requirement.name.lower() in declared and requirement.specifier:
            assert _floor(requirement) == declared[requirement.name.lower()][0], text


def test_the_floors_env_installs_the_floors_file_and_nothing_else() -> None:
    """tox's `floors` env takes its dependencies from the file alone (no dev extra, which would bring newer ones)."""
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(REPO / "tox.ini")
    env = tox["testenv:floors"]
    assert env["deps"].split() == ["-r", "requirements/floors.txt"]
    assert env.get("extras", "").strip() == ""


@pytest.mark.skipif(os.environ.get("TOX_ENV_NAME") != "floors", reason="checks what tox's `floors` env installed")
def test_the_floors_env_runs_on_the_floors() -> None:
    """In `tox -e floors`: what is installed is what the file pins (pip upgraded nothing when it installed the
    plugin itself)."""
    pins = {name: floor for name, (floor, marker) in _pinned().items() if not marker or Marker(marker).evaluate()}
    assert {name: Version(version(name)) for name in pins} == pins
