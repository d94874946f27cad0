"""The IMPALA Pong learning scenario: its table reads each curve at the right times, a side that fails keeps
the points it wrote, and points reach the file as they come."""

import json
import math

import pytest

from spacegraph.report.scenarios import impala_learning as scenario
from spacegraph.reports.impala_learning import PointLog, at, measure, run_side


def rows(result):
    curve, summary = scenario.tables(result)
    return curve.header, {r[0]: r[1:] for r in curve.rows}, {r[0]: r[1:] for r in summary.rows}


def _point(seconds, frames, ret, episodes=10):
    return {"seconds": seconds, "frames": frames, "mean_return_100": ret, "episodes": episodes,
            "cpu_utilisation": 0.9}


def _result(**sides):
    return {"date": "2026-11-25", "machine": "test box", "commit": "abc1234", "minutes": 5.0, "actors": 2,
            "executor": "tf-dist", "every_s": 20.0, "sides": sides}


def test_the_table_reads_each_curve_at_its_minutes_and_stops_at_the_run_length():
    ours = {"points": [_point(30, 1e5, None, 0), _point(59, 2e5, -20.5), _point(119, 4e5, -19.25),
                       _point(290, 9e5, -15.0)]}
    result = _result(ours=ours, rllib={"error": "Ray did not start", "points": []})
    header, curve, summary = rows(result)
    assert header == ["minutes", "1", "2", "5"], "minutes past the run's 5 are left out"
    assert curve["ours: return (frames)"] == ["-20.5 (0.20M)", "-19.2 (0.40M)", "-15.0 (0.90M)"]
    assert curve["RLlib IMPALA: return (frames)"] == ["(Ray did not start)", "", ""]
    assert summary["ours"] == [9e5, pytest.approx(3103.4, abs=0.1), 10, -15.0, "90%", "2026-11-25, abc1234", ""]
    assert summary["RLlib IMPALA"] == [None] * 5 + ["2026-11-25, abc1234", "Ray did not start"]
    (fig,) = scenario.figures(result)
    assert fig.peer_missing == "RLlib's IMPALA: Ray did not start"
    assert fig.headline == ("Pong, 2 actors, mean return of the last 100 episodes after 5 min: ours -15.0 "
                            "(random policy -20.7)")


def test_a_side_that_stopped_early_is_not_read_past_its_last_point():
    """A side that failed after 2 minutes of a 5-minute run: the table says it stopped, not its last return
    again (a crashed Pong run's table repeated its 14-minute point up to 120 minutes)."""
    ours = {"error": "RuntimeError: the staging thread failed",
            "points": [_point(59, 2e5, -20.5), _point(119, 4e5, -20.0)]}
    _, curve, _ = rows(_result(ours=ours))
    assert curve["ours: return (frames)"] == ["-20.5 (0.20M)", "-20.0 (0.40M)", "stopped"]
    assert scenario.figures(_result(ours=ours))[0].peer_missing is None  # RLlib not run at all: the runner says why


def test_at_is_the_last_point_at_or_before_a_time():
    points = [_point(10, 1, -21.0), _point(20, 2, -20.0)]
    assert at(points, 5) is None
    assert at(points, 10)["frames"] == 1 and at(points, 19.9)["frames"] == 1 and at(points, 99)["frames"] == 2


def test_points_reach_the_file_as_they_come(tmp_path):
    log = PointLog(tmp_path / "side.jsonl")
    log.add(1.234, 100, math.nan, 0)
    first = [json.loads(line) for line in (tmp_path / "side.jsonl").read_text().splitlines()]
    assert first == [log.points[0]] and first[0]["mean_return_100"] is None and first[0]["seconds"] == 1.23
    log.add(2.0, 200, -20.25, 3)
    lines = (tmp_path / "side.jsonl").read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[1])["mean_return_100"] == -20.25
    assert all(0.0 <= p["cpu_utilisation"] <= 1.0 for p in log.points)


def test_a_side_that_fails_keeps_the_points_it_wrote(tmp_path):
    points = [_point(20, 5e4, -20.8), _point(40, 1e5, -20.6)]
    (tmp_path / "impala_learning_ours.jsonl").write_text("".join(json.dumps(p) + "\n" for p in points))
    # an executor the child refuses: it exits 2 before it measures anything, as a crashed side would
    out = run_side("ours", 0.1, 1, 1.0, "no-such-executor", tmp_path)
    assert "invalid choice" in out["error"] and out["points"] == points


@pytest.mark.parametrize("kwargs, message", [({"minutes": 0}, "must be positive"),
                                             ({"executor": "mpi"}, "executor must be tf-dist or ray")])
def test_bad_settings_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        measure(**kwargs)
