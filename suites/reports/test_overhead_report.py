"""The overhead scenario's table and ratios say which targets are met from the figures they are given."""

from spacegraph.report.scenarios import overhead as scenario
from spacegraph.reports.overhead import TARGETS


def markdown(result):
    """The scenario's table as Markdown lines, and its notes, as the report writes them."""
    from harness.measure.figures import figure_markdown

    return figure_markdown(scenario.figures(result)[0], None)


def _result(update_torch):
    return {"act": {"tf": {1: [1.0, 0.98]}, "torch": {1: [0.8, 0.82]}},
            "update": {"cartpole": {"tf": [1.0], "torch": [update_torch]}, "nature": {"tf": [0.93, 0.97],
                                                                                     "torch": [0.5]}}, "startup": {"tf": [2.0], "torch": [4.0]},
            "imports": {"tf": [1.5], "torch": [1.0]}, "imports_plain": {"tf": [2.5]},
            "sampling": {"pong-4": {"tf": {"act": [0.9, 0.86], "observing": [0.7]},
                                    "torch": {"act": [0.5], "observing": [0.4, 0.45], "hand_act": [0.9, 0.92],
                                              "traced_act": [0.84, 0.88], "eager_act": [0.7, 0.74]}}}, "targets": TARGETS, "repeats": 2, "seconds": 2.0,
            "commit": "abc1234", "load_before": (1.0, 1.0, 1.0), "load_after": (1.0, 1.0, 1.0), "minutes": 1.0}


def test_table_marks_targets_met_and_missed():
    text = markdown(_result(0.95))
    assert "| act framework/hand, batch 1 | >= 0.95 | 0.99 (0.98-1.00) met | 0.81 (0.80-0.82) NOT met |" in text
    assert "| update hand/framework, CartPole MLP, batch 32 | >= 0.9 | 1.00 met | 0.95 met |" in text
    assert ("| update hand/framework, Nature CNN (Pong frames), batch 32 | >= 0.9 | 0.95 (0.93-0.97) met | "
            "0.50 NOT met |") in text
    assert "first progress line (s) | <= 3.0 | 2.00 met | 4.00 NOT met |" in text
    assert "plain `import tensorflow` in brackets) (s) | - | 1.50 [2.50] | 1.00 |" in text
    assert ("| sampling worker/direct loop, Pong, 4 env(s): acting (observing too) [hand-written act] | >= 0.85 | "
            "0.88 (0.86-0.90) met (0.70) | 0.50 NOT met (0.43) [0.91] |") in text
    assert ("| sampling worker/direct loop, Pong, 4 env(s): acting, `act` traced (`execution.trace: [act]`) | "
            ">= 0.85 | - | 0.86 (0.84-0.88) met |") in text
    assert ("| sampling worker/direct loop, Pong, 4 env(s): acting step by step, no replays (`execution.replay: "
            "false`) | - | - | 0.72 (0.70-0.74) |") in text
    assert "0.89 NOT met" in markdown(_result(0.89))
    # the median is held to the target, not the best repeat
    spread = _result(0.95)
    spread["act"]["torch"][1] = [0.5, 0.6, 0.99]
    assert "| act framework/hand, batch 1 | >= 0.95 | 0.99 (0.98-1.00) met | 0.60 (0.50-0.99) NOT met |" in \
        markdown(spread)
    (fig,) = scenario.figures(_result(0.95))
    verdicts = {r.name: r.met for r in fig.ratios}
    assert verdicts["act framework/hand, batch 1, tf"] is True and verdicts["act framework/hand, batch 1, torch"] is False
    assert verdicts["start-up: `spacegraph train dqn_cartpole` to first progress line (s), torch"] is False
    assert not any("step by step" in name for name in verdicts)  # no target: no ratio
    assert fig.headline == f"{sum(verdicts.values())} of {len(verdicts)} act, update, sampling and start-up measures " \
                           "meet their targets"


def test_the_header_says_whether_the_code_measured_had_uncommitted_changes():
    clean = dict(_result(0.95), uncommitted=[])
    assert "Code measured: abc1234; CPU only" in markdown(clean)
    dirty = dict(clean, uncommitted=[" M harness/execution/executor.py", "?? spacegraph/x.py"])
    assert ("Code measured: abc1234 with uncommitted changes (harness/execution/executor.py, spacegraph/x.py); CPU only"
            in markdown(dirty))
    assert "Code measured: abc1234 (git status unknown); CPU only" in markdown(dict(clean, uncommitted=None))


def test_after_the_import_is_the_median_of_the_per_pair_differences():
    # pairs (start-up, import): differences 0.5, 0.3, 0.9 -> median 0.5; the medians' difference would be 0.4
    paired = dict(_result(0.95), startup={"tf": [3.0, 2.5, 3.1], "torch": [1.5, 1.6, 1.7]},
                  imports={"tf": [2.5, 2.2, 2.2], "torch": [1.4, 1.4, 1.4]})
    text = markdown(paired)
    assert "per pair taken one right after the other) (s) | - | 0.50 (0.30-0.90) | 0.20 (0.10-0.30) |" in text
    assert "first progress line (s) | <= 3.0 | 3.00 (2.50-3.10) met | 1.60 (1.50-1.70) met |" in text
    # a result whose lists are not pairs (older reports) gets no such row
    assert "per pair" not in markdown(dict(paired, imports={"tf": [2.2], "torch": [1.4]}))


def test_import_seconds_stops_at_the_import_and_names_a_failed_one(monkeypatch):
    import pytest

    from spacegraph.reports import overhead

    # the child would sleep 30 s at its exit: the time is taken when it says its import is done
    monkeypatch.setitem(overhead._IMPORTS, "torch", "import json, atexit, time; atexit.register(time.sleep, 30)")
    assert 0.0 < overhead.import_seconds("torch") < 30.0
    monkeypatch.setitem(overhead._IMPORTS, "torch", "import no_such_module_here")
    with pytest.raises(RuntimeError, match="(?s)no_such_module_here.*did not finish its import.*ModuleNotFoundError"):
        overhead.import_seconds("torch")
