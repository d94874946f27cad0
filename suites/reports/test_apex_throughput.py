"""The Ape-X throughput scenario: the side at RLlib's replay ratio, its config, ratios, verdicts and its figure."""

import pytest

from spacegraph.report.scenarios import apex as scenario
from spacegraph.reports.apex_throughput import analysed, ratios, verdicts
from spacegraph.reports.apex_throughput_measure import apex_config, rllib_steps_per_update


def _point(side, workers, learning, fps, **extra):
    return {"side": side, "env": "pong", "workers": workers, "learning": learning, "frames_per_s": fps,
            "cpu_utilisation": 0.9, "seconds": 15.0, **extra}


@pytest.mark.parametrize("workers", [1, 4])
def test_the_matched_side_learns_once_per_rllib_training_step(workers):
    free = apex_config("pong", workers, learning=True)
    matched = apex_config("pong", workers, learning=True, matched=True)
    assert free["apex"]["throttle"] is False and matched["apex"]["throttle"] is True
    # RLlib's DQN: one fragment of n_step (3) steps on each of 4 envs per runner, then one update
    assert rllib_steps_per_update(matched, workers) == 3 * 4 * workers
    assert matched["update"]["every"] == 12 * workers and matched["update"]["repeats"] == 1
    assert {k: v for k, v in matched["update"].items() if k not in ("every", "repeats")} == \
        {k: v for k, v in free["update"].items() if k not in ("every", "repeats")}
    assert apex_config("pong", workers, learning=False, matched=False)["update"] == \
        {**free["update"], "start_after": 10 ** 12}


def test_ratios_and_verdicts_per_side_of_ours():
    points = [_point("raw", 2, False, 10_000.0), _point("rllib", 2, True, 300.0, replay_ratio=1.33),
              _point("apex", 2, True, 800.0, updates_per_s=16.0, replay_ratio=2.5),
              _point("apex_rr", 2, True, 1200.0, updates_per_s=6.0, replay_ratio=1.33),
              _point("rllib", 2, False, 500.0), _point("apex", 2, False, 2000.0)]
    rows = ratios(points)
    by = {(r["side"], r["learning"]): r for r in rows}
    assert set(by) == {("apex", True), ("apex_rr", True), ("apex", False)}
    assert by[("apex", True)]["vs_rllib"] == pytest.approx(800 / 300)
    assert by[("apex_rr", True)]["vs_rllib"] == pytest.approx(4.0)
    assert by[("apex_rr", True)]["of_raw"] == pytest.approx(0.12)
    text = verdicts(rows, "pong")
    assert len(text) == 2
    assert "ours (Ape-X on Ray): not met" in text[0] and "2.67x" in text[0]
    assert "replay ratio: met" in text[1] and "4.00x" in text[1]
    result = analysed({"environment": {"date": "d", "git_revision": "c", "machine": "m", "processor": "p"},
                       "points": points, "seconds_per_point": 15})
    (fig,) = scenario.figures(result)
    (table,) = fig.tables  # no scaling model without the CPU costs of each role
    assert [2, "on", "ours, learner at RLlib's replay ratio", 1200.0, 6.0, 1.33, "90%", 15.0] in table.rows
    assert [2, "on", "RLlib DQN", 300.0, None, 1.33, "90%", 15.0] in table.rows
    by_name = {r.name: r for r in fig.ratios}
    matched = by_name["Ape-X pong 2 workers, learning on: ours, learner at RLlib's replay ratio / RLlib DQN"]
    assert matched.value == pytest.approx(4.0) and matched.met is True
    assert by_name["Ape-X pong 2 workers, learning on: ours (Ape-X on Ray) / RLlib DQN"].met is False
    assert by_name["Ape-X pong 2 workers, learning off: ours / raw stepping"].value == pytest.approx(0.2)
    assert fig.headline == ("Pong, learning on, ours / RLlib DQN frames/s at equal workers: lowest 2.67x over [2] "
                            "workers (target >= 3x: missed)")
    assert fig.peer_missing is None and fig.series and fig.raw is result


def test_without_rllib_the_figure_says_so_and_shows_our_rate():
    points = [_point("raw", 2, False, 10_000.0), _point("apex", 2, True, 800.0, updates_per_s=16.0),
              _point("rllib", 2, True, 0.0, skipped="exit 1: ray.rllib cannot be imported (No module named 'tree')")]
    del points[2]["frames_per_s"]
    (fig,) = scenario.figures(analysed({"points": points, "seconds_per_point": 15}))
    assert fig.peer_missing == "exit 1: ray.rllib cannot be imported (No module named 'tree')"
    assert fig.headline == "Ape-X on pong, 2 workers, learning on: 800 frames/s"
    assert not any("RLlib" in r.name for r in fig.ratios)
