"""One variant's run in the session (session/variant_run.py): its name and its last test."""

from __future__ import annotations

from report_records import variant_run


def test_a_run_is_named_by_its_variant() -> None:
    """name is the variant's name, not the plan's command."""
    assert variant_run("tp2", args=("--tp-size", "2")).name == "tp2"


def test_the_last_test_is_the_last_one_run() -> None:
    """Tests are kept in run order; a run without tests has no last test."""
    run = variant_run(tests=["t.py::a", "t.py::b"])
    assert run.last_test == "t.py::b"
    run.tests.append("t.py::c")
    assert run.last_test == "t.py::c"
    assert variant_run().last_test is None


def test_a_new_run_has_nothing_of_a_server_yet() -> None:
    """Until the session boots it, a run has no process, server, claim, error, configuration or place."""
    run = variant_run()
    assert (run.process, run.server, run.claim, run.boot_error, run.config, run.startup, run.place) == (None,) * 7
    assert run.preflight_errors == [] and run.tests == []
