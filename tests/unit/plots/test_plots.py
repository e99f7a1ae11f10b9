"""The plots (plots/): the numbers pulled out of results documents (intervals, changes, order, boot steps, missing
facts) without drawing, then the drawing itself: real PNG files, their names, labels, SIMULATED, no matplotlib."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from plot_docs import FACTS, OTHER_TEST, TEST, ab_doc, cell, level, png_size, results_doc, samples

from pytest_sglang_perf.gate.ab import CellSamples, ab_lines
from pytest_sglang_perf.plots import data, style
from pytest_sglang_perf.plots.ab import ab_figure
from pytest_sglang_perf.plots.boot import boot_figure
from pytest_sglang_perf.plots.history import history_figure
from pytest_sglang_perf.plots.render import slug, slugs, write_plots
from pytest_sglang_perf.plots.sweep import sweep_figure
from pytest_sglang_perf.plots.sweep_data import SweepLine, sweep_figures
from pytest_sglang_perf.plots.timeline import GRAPHS, KV_CACHE, OTHER, WEIGHTS, boot_bar, boot_bars
from pytest_sglang_perf.server.startup import GraphCapture, StartupFacts

# The numbers ------------------------------------------------------------------------------------------------

def test_an_estimate_is_the_geometric_mean_with_a_t_interval_on_logs() -> None:
    values = (90.0, 100.0, 110.0, 105.0)
    logs = [math.log(v) for v in values]
    mean = sum(logs) / 4
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 3)
    half = 3.182446305284263 * sd / 2  # t(0.975, 3 df) * sd / sqrt(4)
    found = data.estimate(values, 0.95, baseline=99.0)
    assert found is not None
    assert found.center == pytest.approx(math.exp(mean))
    assert found.low == pytest.approx(math.exp(mean - half)) and found.high == pytest.approx(math.exp(mean + half))
    assert (found.median, found.n, found.baseline) == (102.5, 4, 99.0)
    wider = data.estimate(values, 0.99)
    assert wider is not None and wider.low < found.low and wider.high > found.high


@pytest.mark.parametrize(("values", "expected"), [
    ((), None), ((1.0, 0.0), None), ((1.0, -2.0), None), ((1.0, math.nan), None),
])
def test_no_estimate_without_positive_values(values: tuple[float, ...], expected: None) -> None:
    assert data.estimate(values) is expected


def test_one_value_or_identical_values_give_the_point() -> None:
    for values in ((4.0,), (4.0, 4.0, 4.0)):
        found = data.estimate(values)
        assert found is not None and found.low == found.center == found.high == pytest.approx(4.0)


def test_the_change_agrees_with_the_ab_report() -> None:
    """The same statistics as `sglang-perf compare`: the change and its interval read the same."""
    reference, measured = (90.0, 100.0, 110.0, 105.0), (120.0, 130.0, 125.0, 128.0)
    found = data.change(reference, measured, "output_throughput")
    line = ab_lines([CellSamples(TEST, "default", False, {"output_throughput": reference}),
                     CellSamples(TEST, "sbo", False, {"output_throughput": measured})])[2]
    assert found is not None and found.verdict == "better"
    assert line == (f"  sbo vs default: output_throughput {found.change * 100:+.1f}% [{found.low * 100:+.1f}%, "
                    f"{found.high * 100:+.1f}%] significant: better")


@pytest.mark.parametrize(("metric", "factor", "verdict"), [
    ("ttft", 0.5, "better"), ("ttft", 2.0, "worse"), ("output_throughput", 0.5, "worse"),
    ("made_up", 2.0, "higher"),
])
def test_the_verdict_follows_the_metrics_direction(metric: str, factor: float, verdict: str) -> None:
    found = data.change((1.0, 1.01, 0.99), (factor, factor * 1.01, factor * 0.99), metric)
    assert found is not None and found.verdict == verdict


def test_overlapping_samples_are_not_significant_and_one_sample_gives_no_change() -> None:
    found = data.change((1.0, 1.2, 0.8), (1.05, 0.85, 1.15), "ttft")
    assert found is not None and found.verdict == "not significant" and found.low < 0 < found.high
    assert data.change((1.0,), (1.1, 1.2), "ttft") is None


def test_the_ab_figure_of_a_test() -> None:
    figures = data.ab_figures(ab_doc())
    assert len(figures) == 1
    figure = figures[0]
    assert (figure.test_id, figure.variants, figure.reference) == (TEST, ("default", "prefill_graph", "sbo"),
                                                                   "default")
    assert figure.missing == ("broken",) and figure.simulated
    names = [panel.metric for panel in figure.panels]
    assert names == ["output_throughput", "decode_throughput", "ttft", "tpot", "accept_length"]
    throughput = figure.panels[0]
    assert (throughput.unit, throughput.better) == ("tok/s", "higher is better")
    default, faster, _ = throughput.estimates
    assert default is not None and faster is not None
    assert default.center == pytest.approx(51.2, rel=0.01) and default.baseline == 51.0 and default.n == 5
    assert faster.center == pytest.approx(64.0, rel=0.01) and faster.baseline is None
    assert throughput.changes[0] is None
    change = throughput.changes[1]
    assert change is not None and change.change == pytest.approx(0.25) and change.verdict == "better"
    accept = figure.panels[-1]
    assert accept.estimates[:2] == (None, None) and accept.estimates[2] is not None
    assert accept.changes[2] is None  # the reference has no accept_length: no change to give
    assert figure.panels[2].better == "lower is better" and figure.panels[2].unit == "s"


def test_the_reference_is_default_else_the_first_variant_and_none_alone() -> None:
    first = data.ab_figures(results_doc([cell("sbo"), cell("prefill_graph"), cell("other", OTHER_TEST)]))
    assert [(f.test_id, f.reference) for f in first] == [(TEST, "sbo"), (OTHER_TEST, None)]
    assert first[1].panels[0].changes == ()


def test_a_test_without_any_sample_has_no_figure_and_a_bad_sample_names_its_cell() -> None:
    assert data.ab_figures(results_doc([cell("default", raw=[])])) == []
    with pytest.raises(ValueError, match=r"cell tests/perf/test_prompts.py::test_red_black_tree \[default\] has a "
                                         r"malformed sample \(KeyError"):
        data.ab_figures(results_doc([cell("default", raw=[{"ttft": 1.0}])]))


def test_documents_are_ordered_by_generated_at() -> None:
    late = results_doc([], generated_at="2026-12-02T01:00:00+00:00")
    early_in_another_zone = results_doc([], generated_at="2026-12-02T08:00:00+09:00")  # 2026-12-01 23:00 UTC
    undated = results_doc([], generated_at="not a date")
    assert data.by_time([late, early_in_another_zone, undated]) == [undated, early_in_another_zone, late]


def test_run_labels_give_the_date_in_utc_and_the_commit_when_there_is_one() -> None:
    doc = results_doc([], generated_at="2026-12-02T08:00:00+09:00", commit="1410775f314dabc")
    assert data.run_label(doc) == "2026-12-01 23:00 UTC\n1410775f31"
    doc["machine"]["dirty"] = True
    assert data.run_commit(doc) == "1410775f31 (dirty)"
    assert data.run_label(results_doc([], commit=None)) == "2026-12-01 06:16 UTC"
    older = results_doc([])
    del older["machine"]
    assert data.run_commit(older) is None and data.run_date({}) == "date unknown"


def test_history_follows_the_documents_in_time_order() -> None:
    first = results_doc([cell("default", raw=samples(e2e=10.0)), cell("sbo", OTHER_TEST)],
                        generated_at="2026-12-01T00:00:00+00:00", commit="aaaaaaaaaaaa")
    second = results_doc([cell("default", raw=samples(e2e=8.0), baselines={"output_throughput": 51.2})],
                         generated_at="2026-12-02T00:00:00+00:00", commit=None, simulated=False)
    third = results_doc([cell("default", raw=[])], generated_at="2026-12-03T00:00:00+00:00", commit="cccccccccccc")
    figures = data.history_figures([third, second, first])
    assert [(f.test_id, f.variant) for f in figures] == [(TEST, "default")]  # sbo is in one file only
    figure = figures[0]
    assert figure.labels == ("2026-12-01 00:00 UTC\naaaaaaaaaa", "2026-12-02 00:00 UTC", "2026-12-03 00:00 UTC\n"
                             "cccccccccc")
    assert figure.simulated == (True, True, True)  # the cells say simulated, whatever the file says
    throughput = figure.panels[0]
    old, new, missing = throughput.estimates
    assert old is not None and new is not None and missing is None
    assert old.center == pytest.approx(51.2, rel=0.01) and new.center == pytest.approx(64.0, rel=0.01)
    assert (old.baseline, new.baseline) == (None, 51.2)


# The boot steps --------------------------------------------------------------------------------------------

def test_a_boot_bar_stacks_the_logged_steps_and_the_rest_until_ready() -> None:
    bar = boot_bar("default", FACTS.to_dict(), 40.0)
    assert [(s.label, s.kind, s.seconds) for s in bar.segments] == [
        (WEIGHTS, WEIGHTS, 20.0), (KV_CACHE, KV_CACHE, 2.5), (f"{GRAPHS}: decode", GRAPHS, 6.0),
        (f"{GRAPHS}: prefill", GRAPHS, 3.0), (OTHER, OTHER, pytest.approx(8.5)),
    ]  # draft_decode took 0 s: not drawn
    assert (bar.total, bar.not_logged, bar.note) == (40.0, (), None)


def test_steps_not_logged_are_said_and_never_invented() -> None:
    bar = boot_bar("default", StartupFacts(load_weight=12.0).to_dict(), 30.0)
    assert [s.label for s in bar.segments] == [WEIGHTS, OTHER]
    assert bar.segments[1].seconds == 18.0 and bar.not_logged == (KV_CACHE, GRAPHS)
    nothing = boot_bar("default", None, 30.0)
    assert [(s.label, s.seconds) for s in nothing.segments] == [(OTHER, 30.0)]
    assert nothing.not_logged == (WEIGHTS, KV_CACHE, GRAPHS)
    no_total = boot_bar("default", FACTS.to_dict(), None)
    assert no_total.total is None and no_total.not_logged == ("ready time",)
    assert OTHER not in [s.label for s in no_total.segments]


def test_graph_capture_falls_back_to_the_capture_lines_then_the_total() -> None:
    captures = (GraphCapture("target decode", 4.0), GraphCapture("draft decode", None))
    from_lines = boot_bar("v", StartupFacts(captures=captures).to_dict(), 10.0)
    assert [(s.label, s.seconds) for s in from_lines.segments if s.kind == GRAPHS] == [(f"{GRAPHS}: target decode",
                                                                                       4.0)]
    total = boot_bar("v", StartupFacts(graph_capture_seconds=5.0).to_dict(), 10.0)
    assert [(s.label, s.seconds) for s in total.segments if s.kind == GRAPHS] == [(GRAPHS, 5.0)]


def test_steps_longer_than_the_boot_get_a_note_not_a_negative_rest() -> None:
    bar = boot_bar("v", FACTS.to_dict(), 30.0)
    assert OTHER not in [s.label for s in bar.segments]
    assert bar.note == "the logged steps (31.50 s) add up to more than the boot (30.00 s)"


def test_boot_bars_come_from_the_servers_else_from_the_cells() -> None:
    doc = results_doc([cell("default"), cell("sbo")], servers={"sbo": {"boot_seconds": 9.0, "startup": None}})
    doc["cells"][0].update(boot_seconds=11.0, startup=StartupFacts(load_weight=1.0).to_dict())
    bars = boot_bars(doc)
    assert [(b.variant, b.total) for b in bars] == [("sbo", 9.0), ("default", 11.0)]
    assert boot_bars(results_doc([cell("x")], servers={})) == []  # neither servers nor boot facts in the cells


# File names -------------------------------------------------------------------------------------------------

def test_slugs_are_safe_stable_and_distinct() -> None:
    assert slug(TEST) == "tests-perf-test_prompts.py-test_red_black_tree"
    assert slug(OTHER_TEST) == "tests-perf-test_prompts.py-test_short_factual-long-param-x"
    long = slug("t" * 300)
    assert len(long) <= 80 and long == slug("t" * 300) and long != slug("t" * 301)
    names = slugs(["a/b", "a b", "c", "a/b"])
    assert names["c"] == "c" and len(set(names.values())) == 3
    assert names["a/b"].startswith("a-b-") and names["a b"].startswith("a-b-")


# Drawing ------------------------------------------------------------------------------------------------------


def test_one_document_gives_an_ab_picture_per_test_and_the_boot_timeline(tmp_path: Path) -> None:
    doc = ab_doc()
    doc["cells"].append(cell("default", OTHER_TEST))
    written = write_plots([doc], tmp_path / "plots")
    assert [p.name for p in written] == [f"ab__{slug(TEST)}.png", f"ab__{slug(OTHER_TEST)}.png", "boot.png"]
    for path in written:
        width, height = png_size(path)
        assert 600 <= width <= 4000 and 300 <= height <= 3000, (path, width, height)
        assert path.stat().st_size > 20_000


def test_several_documents_add_the_history_of_each_test_and_variant(tmp_path: Path) -> None:
    old = results_doc([cell("default"), cell("sbo")], generated_at="2026-11-30T00:00:00+00:00")
    new = results_doc([cell("default", raw=samples(e2e=9.0)), cell("sbo")])
    written = write_plots([new, old], tmp_path)
    assert [p.name for p in written] == [f"ab__{slug(TEST)}.png", "boot.png", f"history__{slug(TEST)}__default.png",
                                         f"history__{slug(TEST)}__sbo.png"]
    assert all(png_size(p)[0] > 600 for p in written)


def test_no_cells_draws_nothing(tmp_path: Path) -> None:
    assert write_plots([results_doc([])], tmp_path / "plots") == []
    assert not (tmp_path / "plots").exists()


def test_without_matplotlib_the_error_says_how_to_install_it(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError) as raised:
        write_plots([ab_doc()], tmp_path)
    assert str(raised.value) == "plots need matplotlib: pip install 'pytest-sglang-perf[plots]'"
    assert list(tmp_path.iterdir()) == []


def test_the_session_turns_a_missing_matplotlib_into_an_error_naming_the_option(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_sglang_perf.config.run_options import RunOptions
    from pytest_sglang_perf.outputs.writers import write_outputs

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    outputs = write_outputs(ab_doc, RunOptions(plots_dir=tmp_path / "p"), {}, measured=True)
    assert outputs.written == []
    assert outputs.errors == [f"--sglang-plots {tmp_path / 'p'}: plots need matplotlib: pip install "
                              "'pytest-sglang-perf[plots]'"]


def test_importing_the_plots_does_not_import_matplotlib() -> None:
    code = ("import sys, pytest_sglang_perf.plots.render, pytest_sglang_perf.cli.plot\n"
            "print('matplotlib' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "False"


def texts(figure: Any) -> list[str]:
    return [text.get_text() for text in figure.texts]


def test_the_ab_picture_labels_units_direction_and_changes() -> None:
    figure = data.ab_figures(ab_doc())[0]
    drawn = ab_figure(figure, confidence=0.9, subtitle=["model m"])
    visible = [ax for ax in drawn.axes if ax.get_visible()]
    assert [ax.get_title() for ax in visible] == [
        "output_throughput (tok/s)\nhigher is better", "decode_throughput (tok/s)\nhigher is better",
        "ttft (ms)\nlower is better", "tpot (ms)\nlower is better", "accept_length (tok/step)\nhigher is better",
    ]
    assert visible[2].get_ylabel() == "ms"  # 0.1 s is shown as 100 ms
    assert [t.get_text() for t in visible[0].get_xticklabels()] == ["default\nn=5", "prefill_graph\nn=5", "sbo\nn=5"]
    annotations = [t.get_text() for t in visible[0].texts]
    assert "+25.0%" in annotations[0] and annotations[0].endswith("better")
    assert annotations[1].endswith("not significant") and "-0.0%" not in annotations[1]
    assert TEST in texts(drawn) and style.SIMULATED_LINE in texts(drawn) and "SIMULATED" in texts(drawn)
    assert any("90% confidence interval" in t for t in texts(drawn))
    assert any("no samples (not drawn): broken" in t for t in texts(drawn))


def test_real_numbers_are_not_marked_simulated() -> None:
    doc = results_doc([cell("default", simulated=False)], simulated=False)
    drawn = ab_figure(data.ab_figures(doc)[0], confidence=0.95, subtitle=[])
    assert not [t for t in texts(drawn) if "SIMULATED" in t]
    boot = boot_figure(boot_bars(doc), subtitle=[], simulated=False)
    assert not [t for t in texts(boot) if "SIMULATED" in t]


def test_the_boot_timeline_says_what_was_not_logged() -> None:
    bars = [boot_bar("default", FACTS.to_dict(), 40.0), boot_bar("sbo", None, None)]
    drawn = boot_figure(bars, subtitle=[], simulated=True)
    ax = drawn.axes[0]
    side = [t.get_text() for t in ax.texts if t.get_text().startswith(("ready", "not logged"))]
    assert side == ["ready in 40.00 s\nweights 20.00 s, KV cache 2.50 s, graphs 9.00 s",
                    "ready time: not logged\nnot logged: weights loaded, KV cache allocated, graph capture"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["default", "sbo"]
    assert ax.get_xlabel() == "seconds from launch" and style.SIMULATED_LINE in texts(drawn)


def test_the_history_marks_the_simulated_runs_among_real_ones() -> None:
    real = results_doc([cell("default", simulated=False)], simulated=False, generated_at="2026-11-30T00:00:00Z")
    simulated = results_doc([cell("default")])
    figure = data.history_figures([real, simulated])[0]
    drawn = history_figure(figure, confidence=0.95, subtitle=[])
    ticks = drawn.axes[0].get_xticklabels()
    assert [t.get_text() for t in ticks] == ["2026-11-30 00:00 UTC\n1410775f31", "2026-12-01 06:16 UTC\n1410775f31"]
    assert [t.get_color() for t in ticks][1] == style.RED and ticks[0].get_color() != style.RED
    assert any("red x labels: results files with SIMULATED numbers" in t for t in texts(drawn))


def test_a_long_test_id_is_broken_at_its_natural_marks() -> None:
    long_id = ("tests/perf/test_prompts.py::test_a_really_long_parametrized_case"
               "[prompt=summarise-this-very-long-document-please-v2-1024-tokens]")
    assert style.title_rows(TEST, 8.0) == [TEST]
    rows = style.title_rows(long_id, 8.0)
    assert rows == ["tests/perf/test_prompts.py::test_a_really_long_parametrized_case",
                    "[prompt=summarise-this-very-long-document-please-v2-1024-tokens]"]
    assert "".join(style.title_rows("x" * 500, 8.0)) == "x" * 500


@pytest.mark.parametrize(("panels", "max_columns", "expected"), [
    (1, 3, (1, 1)), (2, 3, (1, 2)), (4, 3, (2, 2)), (5, 3, (2, 3)), (7, 3, (3, 3)), (5, 1, (5, 1)), (4, 0, (4, 1)),
])
def test_the_panel_grid(panels: int, max_columns: int, expected: tuple[int, int]) -> None:
    from pytest_sglang_perf.plots.ab import grid

    assert grid(panels, max_columns) == expected


def test_a_sweep_is_each_variants_levels_in_order_and_a_single_level_is_no_sweep() -> None:
    doc = results_doc([level("default", 16, 900.0, ttft_p99=None), level("default", 1, 60.0),
                       level("default", 4, 220.0), level("sbo", 1, 70.0, goodput=1.0), level("sbo", 4, 250.0),
                       {**cell("default", OTHER_TEST), "load": {"streams": 1}}])
    [figure] = sweep_figures(doc)
    assert figure.test_id == TEST and figure.simulated
    panels = {panel.title.split(" (")[0].split(" over")[0]: panel for panel in figure.panels}
    assert list(panels) == ["output throughput", "TTFT p99", "TPOT p99", "goodput"]
    assert panels["output throughput"].lines == (SweepLine("default", ((1, 60.0), (4, 220.0), (16, 900.0))),
                                                 SweepLine("sbo", ((1, 70.0), (4, 250.0))))
    assert panels["TTFT p99"].unit == "ms" and panels["TTFT p99"].lines[0].points == ((1, 200.0), (4, 200.0))
    assert panels["goodput"].lines == (SweepLine("sbo", ((1, 1.0),)),)
    assert sweep_figures(results_doc([level("default", 4, 1.0), level("sbo", 4, 2.0)])) == []
    assert sweep_figures(results_doc([cell("default"), cell("sbo")])) == []  # no load record: an older file


def test_the_sweep_picture_is_drawn_after_the_ab_pictures(tmp_path: Path) -> None:
    doc = results_doc([level("default", 1, 60.0), level("default", 4, 220.0, goodput=3.0),
                       level("default", 16, 700.0)])
    written = write_plots([doc], tmp_path)
    sweep = f"sweep__{slug(TEST)}.png"
    assert [p.name for p in written][-2:] == [sweep, "boot.png"]
    assert png_size(tmp_path / sweep)[0] > 600 and (tmp_path / sweep).stat().st_size > 20_000
    drawn = sweep_figure(sweep_figures(doc)[0], subtitle=[])
    axes = [ax for ax in drawn.axes if ax.get_visible()]
    assert [ax.get_xticks().tolist() for ax in axes] == [[1, 4, 16]] * 4  # goodput, at one level, too
    assert [label.get_text() for label in axes[0].get_xticklabels()] == ["1", "4", "16"]
