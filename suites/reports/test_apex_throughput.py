"""The Ape-X throughput report: the side at RLlib's replay ratio, its config, ratios and verdicts."""

import pytest

from spacegraph.reports.apex_throughput_measure import apex_config, rllib_steps_per_update
from spacegraph.reports.apex_throughput_report import markdown, ratios, verdicts


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
    assert "ours (Ape-X on Ray): **not met**" in text[0] and "2.67x" in text[0]
    assert "replay ratio: **met**" in text[1] and "4.00x" in text[1]
    md = markdown({"environment": {"date": "d", "git_revision": "c", "machine": "m", "processor": "p",
                                   "load_average_before": [0], "load_average_after": [0],
                                   "measurement_seconds": 1.0},
                   "points": points, "seconds_per_point": 15, "ratios": rows, "scaling": {}, "baselines": []})
    assert "| replay ratio |" in md
    assert "| 2 | on | ours, learner at RLlib's replay ratio | 1,200 | 6.0 | 1.33 | 90% | 15.0 |" in md
    assert "| 2 | on | RLlib DQN | 300 | - | 1.33 |" in md
