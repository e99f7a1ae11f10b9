"""`sglang-perf baseline accept RESULTS.json...`: results files from CI runs (GPU runners) become baseline entries,
so that a person refreshes the baselines without a GPU.

Each cell of a results file offers the entry `--sglang-update-baselines` would have recorded (`entry`) for the
environment key it was judged against (`environment_key`); it is stored as `source: accepted` (the results file's
name, the machine's host, whether its checkout was dirty, when the file was written), keeping its own `recorded_at`
and `commit`. Several files merge in order, so a CI matrix across runners feeds one baseline folder; when two files
measured the same cell, the later `generated_at` wins (on a tie, the later file on the command line), and that is said.

A cell is refused (exit 1; the others are still accepted) when (a cell a refresh run recorded reads `updated`: it is
judged on what it was against the baseline it replaced, results_doc._verdict):
- its verdict is `stale` (measured for another request, server args, model or GPUs than its baseline):
  `--allow-stale` accepts it;
- its verdict is `regressed`, or `inconclusive` (worse than its baseline beyond the tolerance without statistical
  evidence: accepting it would lower the bar just the same): `--allow-regressed` accepts both;
- its environment key has no file in the baseline folder yet (the folder's files are the environments the project
  gates on; a simulated key next to real-GPU files, or the reverse, is said): `--new-environment` starts one;
- its entry disagrees with itself (consistency.py): never accepted.
A cell that measured nothing (no entry) is skipped. `--dry-run` says what would change and writes nothing. Every write
goes through BaselineStore.write (merged under the file's lock, replaced atomically): concurrent accepts into one
folder keep each other's cells.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pytest_sglang_perf.cli.baseline.consistency import entry_problems
from pytest_sglang_perf.cli.baseline.project import keys_text, plural, read_directory
from pytest_sglang_perf.cli.baseline.results_doc import OfferedCell, ResultsFile, read_results
from pytest_sglang_perf.errors import SGLangPerfError
from pytest_sglang_perf.gate.baseline import BaselineEntry
from pytest_sglang_perf.gate.environment import SIMULATED_PREFIX
from pytest_sglang_perf.gate.store import BaselineStore
from pytest_sglang_perf.wrapping import wrap_lines

_WORSE = ("regressed", "inconclusive")


@dataclass(frozen=True)
class AcceptOptions:
    allow_stale: bool = False
    allow_regressed: bool = False
    new_environment: bool = False
    dry_run: bool = False


@dataclass(frozen=True)
class Offer:
    """A cell with an entry, from one results file."""

    results: ResultsFile
    cell: OfferedCell

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.cell.environment_key or "", self.cell.test_id, self.cell.variant)

    @property
    def entry(self) -> BaselineEntry:
        assert self.cell.entry is not None  # only cells with an entry are offers
        return self.cell.entry

    @property
    def name(self) -> str:
        return self.results.path.name


@dataclass
class Decision:
    offer: Offer
    refused: list[str] = field(default_factory=list)
    """Why the cell is refused, each reason with the flag that accepts it; empty: accepted."""
    environment: str | None = None
    """Why its environment key is refused, in full (said once per results file and key); also in `refused`, short."""
    exists: bool = False
    """The baseline folder already has an entry for this cell (update, not create)."""


def accept_command(paths: Sequence[Path], directory: Path, options: AcceptOptions) -> int:
    """Accept the results files' cells into `directory`; prints a line per cell and the counts. 0: all accepted or
    skipped, 1: something was refused, 2: bad input (a results file or a baseline file that cannot be used)."""
    try:
        files = [read_results(path) for path in paths]
    except SGLangPerfError as exc:
        print(f"sglang-perf baseline accept: {exc}", file=sys.stderr)
        return 2
    target = read_directory(directory)
    if target.problems:
        for problem in target.problems:
            print(f"sglang-perf baseline accept: {problem}", file=sys.stderr)
        print("sglang-perf baseline accept: nothing accepted; fix or move that file first", file=sys.stderr)
        return 2
    existing = {f.environment_key: set(f.entries) for f in target.files}
    offers, notes = merge(files)
    skipped = [(r, c) for r in files for c in r.cells if c.entry is None]
    decisions = [decide(offer, existing, directory, options) for offer in offers]
    lines = [*notes, *_skipped_lines(skipped), *(_decision_line(d, options.dry_run) for d in decisions),
             *dict.fromkeys(f"refused   {d.environment}" for d in decisions if d.environment)]
    accepted = [d for d in decisions if not d.refused]
    written = 0
    if accepted and not options.dry_run:
        try:
            written = _write(directory, [d.offer.entry for d in accepted], [d.offer.cell for d in accepted])
        except (SGLangPerfError, OSError) as exc:
            print(f"sglang-perf baseline accept: {exc}", file=sys.stderr)
            return 2
    lines.append(_counts(decisions, len(skipped), directory, options.dry_run, written))
    print("\n".join(wrap_lines(lines)))
    return 1 if any(d.refused for d in decisions) else 0


def merge(files: Sequence[ResultsFile]) -> tuple[list[Offer], list[str]]:
    """Every cell with an entry, one per (environment key, test, variant): the latest generated_at wins (a tie: the
    later file); a line for each cell that more than one file measured."""
    chosen: dict[tuple[str, str, str], Offer] = {}
    notes: list[str] = []
    for results in files:
        for cell in results.cells:
            if cell.entry is None:
                continue
            offer = Offer(results, cell)
            earlier = chosen.get(offer.key)
            if earlier is None:
                chosen[offer.key] = offer
                continue
            newer, older = (offer, earlier) if _when(offer) >= _when(earlier) else (earlier, offer)
            chosen[offer.key] = newer
            notes.append(f"note      {cell.test_id} [{cell.variant}]: measured by {older.name} (generated "
                         f"{older.results.generated_at or 'at an unknown time'}) and {newer.name} (generated "
                         f"{newer.results.generated_at or 'at an unknown time'}): taking {newer.name}'s, the later")
    return list(chosen.values()), notes


def _when(offer: Offer) -> datetime:
    text = offer.results.generated_at
    try:
        found = datetime.fromisoformat(text) if text else datetime.min
    except ValueError:
        found = datetime.min
    return found.replace(tzinfo=UTC) if found.tzinfo is None else found


def decide(offer: Offer, existing: Mapping[str, set[tuple[str, str]]], directory: Path,
           options: AcceptOptions) -> Decision:
    """Accepted, or refused with every reason (and the flag that overrides it)."""
    cell = offer.cell
    decision = Decision(offer)
    decision.environment = _environment_problem(offer, existing, directory, options)
    if decision.environment is not None:
        decision.refused.append(f"environment key {cell.environment_key!r} is not accepted (below)")
    if cell.verdict == "stale" and not options.allow_stale:
        what = f" ({'; '.join(cell.stale)})" if cell.stale else ""
        decision.refused.append(f"stale: measured for another request, server args, model or GPUs than its "
                                f"baseline{what}; pass --allow-stale to accept it")
    if cell.verdict in _WORSE and not options.allow_regressed:
        decision.refused.append(f"{cell.verdict}: worse than its baseline beyond the tolerance; pass "
                                "--allow-regressed to accept it as the new baseline")
    problems = list(entry_problems(offer.entry))
    if problems:
        decision.refused.append(f"its entry disagrees with itself ({'; '.join(problems)}); write the results file "
                                "again")
    decision.exists = (cell.test_id, cell.variant) in existing.get(cell.environment_key or "", set())
    return decision


def _environment_problem(offer: Offer, existing: Mapping[str, set[tuple[str, str]]], directory: Path,
                         options: AcceptOptions) -> str | None:
    """Why the cell's environment key is refused (naming the results file, the key, the folder's keys and the flag);
    None when it is accepted."""
    key = offer.cell.environment_key
    if not key:
        return (f"{offer.name}: a cell gives no environment key; write the results file again with this version "
                "(pytest --sglang-results PATH)")
    try:
        BaselineStore(directory, key)
    except ValueError:
        return f"{offer.name}: environment key {key!r} is not a safe file name; write the results file again"
    if key in existing or options.new_environment:
        return None
    kind = ""
    keys = sorted(existing)
    if keys and key.startswith(SIMULATED_PREFIX) and not any(k.startswith(SIMULATED_PREFIX) for k in keys):
        kind = "; these are SIMULATED numbers, the folder holds real-GPU baselines"
    elif keys and not key.startswith(SIMULATED_PREFIX) and all(k.startswith(SIMULATED_PREFIX) for k in keys):
        kind = "; these are real-GPU numbers, the folder holds only SIMULATED baselines"
    return (f"{offer.name}: environment key {key!r} has no baseline file in {directory}/ (it has: "
            f"{keys_text(keys)}){kind}; pass --new-environment to start a baseline file for it")


def _skipped_lines(skipped: Sequence[tuple[ResultsFile, OfferedCell]]) -> Iterator[str]:
    for results, cell in skipped:
        why = cell.skipped or "nothing measured, no entry to accept"
        yield f"skipped   {cell.test_id} [{cell.variant}] ({results.path.name}): {why}"


def _decision_line(decision: Decision, dry_run: bool) -> str:
    cell = decision.offer.cell
    where = f"{cell.test_id} [{cell.variant}]"
    if decision.refused:
        return f"refused   {where} ({decision.offer.name}): {'; '.join(decision.refused)}"
    action = ("would update" if dry_run else "updated") if decision.exists else \
        ("would create" if dry_run else "created")
    return f"{action.ljust(9)} {where} in {cell.environment_key}.json (from {decision.offer.name})"


def _write(directory: Path, entries: Sequence[BaselineEntry], cells: Sequence[OfferedCell]) -> int:
    """Each environment key's entries through its BaselineStore (the header: the last entry's environment)."""
    by_key: dict[str, list[BaselineEntry]] = {}
    for entry, cell in zip(entries, cells, strict=True):
        by_key.setdefault(cell.environment_key or "", []).append(entry)
    for key, group in by_key.items():
        BaselineStore(directory, key).write(group, group[-1].environment)
    return len(by_key)


def _counts(decisions: Sequence[Decision], skipped: int, directory: Path, dry_run: bool, files: int) -> str:
    accepted = [d for d in decisions if not d.refused]
    created = sum(not d.exists for d in accepted)
    refused = len(decisions) - len(accepted)
    text = (f"sglang-perf baseline accept: {created} created, {len(accepted) - created} updated, {refused} refused, "
            f"{skipped} skipped")
    if dry_run:
        return text + " (dry run: nothing written)"
    return text + (f"; {plural(files, 'file')} written in {directory}/" if files else "; nothing written")
