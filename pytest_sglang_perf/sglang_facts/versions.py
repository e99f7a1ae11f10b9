"""Which covered SGLang version's facts serve a given version, and the line that says so when it is another one.

A flag table (`data/sglang-<version>-flags.json`, generated from the release's wheel) and a rules file
(`data/sglang-<version>-rules.json`, curated from its source; its `holds_for` names the later releases whose source
was read and found to need no other rule) exist for some releases only. A version without its
own file gets the nearest older covered version's (SGLang changes its flags and rules forward: an older release's
facts are the closest reading of an unknown patch release after it); a version older than every covered one, or
one whose number does not parse, gets the oldest covered one. Either way the choice is said, never silent.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"


def version_key(version: str) -> tuple[int, ...]:
    """`0.5.12.post1` -> (0, 5, 12, 1); a release sorts before its posts. Raises ValueError for another form."""
    match = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)(?:\.post(\d+))?", version)
    if match is None:
        raise ValueError(f"not an SGLang release number: {version!r}")
    return tuple(int(part or 0) for part in match.groups())


@dataclass(frozen=True)
class FactsVersion:
    """The covered version whose facts serve `asked`; `note` says so when it is not `asked` itself."""

    asked: str
    used: str
    note: str | None = None


@cache
def covered(kind: str) -> tuple[str, ...]:
    """The versions with a `sglang-<version>-<kind>.json` file (kind: "flags" or "rules"), oldest first."""
    found = [match.group(1) for path in DATA.glob(f"sglang-*-{kind}.json")
             if (match := re.fullmatch(rf"sglang-(.+)-{kind}\.json", path.name)) is not None]
    return tuple(sorted(found, key=version_key))


@cache
def read_for(kind: str) -> dict[str, str]:
    """Release -> the covered version whose file was read to hold for it: each file's own version, and for a rules
    file the releases of its `holds_for` list too (the 0.5.16 file was read against 0.5.17 and 0.5.18 as well)."""
    out = {version: version for version in covered(kind)}
    if kind == "rules":
        for version in covered(kind):
            data = json.loads((DATA / f"sglang-{version}-rules.json").read_text(encoding="utf-8"))
            out.update({str(release): version for release in data.get("holds_for", ()) if release not in out})
    return out


def facts_version(asked: str, kind: str) -> FactsVersion:
    """The covered version whose `kind` facts serve SGLang `asked` (see the module's docstring)."""
    versions = covered(kind)
    if not versions:
        raise FileNotFoundError(f"no SGLang {kind} file in {DATA}")
    if asked in read_for(kind):
        return FactsVersion(asked, read_for(kind)[asked])
    what, verb, those = ("flag table", "is", "that") if kind == "flags" else ("rules", "are", "those")
    try:
        key = version_key(_release(asked))
    except ValueError:
        return FactsVersion(asked, versions[-1], f"SGLang {asked!r} is not a release number the plugin reads: "
                                                 f"{versions[-1]}'s {what} {verb} used")
    older = [version for version in versions if version_key(version) <= key]
    if older:
        return FactsVersion(asked, older[-1], f"SGLang {asked} has no {what} of its own here: {those} of "
                                              f"{older[-1]}, the nearest older covered version, {verb} used")
    return FactsVersion(asked, versions[0], f"SGLang {asked} is older than every covered version "
                                            f"({versions[0]} to {versions[-1]}): {versions[0]}'s {what} {verb} used")


def _release(version: str) -> str:
    """`0.5.19rc1`, `0.5.19+cu128`, `0.5.19.dev3` -> `0.5.19`; a post release stays as it is."""
    match = re.match(r"\d+\.\d+\.\d+(?:\.post\d+)?", version)
    return match.group(0) if match is not None else version
