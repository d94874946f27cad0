"""Frame replay vs RLlib (issue 13, the ``frame_replay`` scenario): a short run on tiny Pong data, its figure, the
RLlib skip, and the whole-process child on a tiny fill. No speed asserts."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from harness.measure.figures import plot_figure
from spacegraph.report import rerender
from spacegraph.report.registry import SCENARIOS
from spacegraph.report.scenarios import frame_replay as scenario
from spacegraph.reports import frame_replay_contenders as contenders
from spacegraph.reports import frame_replay_measure
from spacegraph.reports.rllib import rllib_missing

SHORT = {"capacity": 300, "seconds": 0.3, "rounds": 2, "insert_batch": 16}
HAVE_RLLIB = rllib_missing(*contenders.RLLIB_MODULES) is None


@pytest.fixture(scope="module")
def records():
    """A tiny real Pong rollout: 2 environments, 40 lockstep steps, 3-step records."""
    return contenders.pong_rollout(num_envs=2, steps=40)


@pytest.fixture(scope="module")
def ours_only(records):
    return frame_replay_measure.measure(records=records, rllib=False, **SHORT)


def test_rollout_records_are_pong_stacks(records):
    n = len(records["actions"])
    assert n >= 2 * 40 - 2 * 3  # every step finishes a window, but the last n-1 per env
    assert records["states"].shape == (n, 84, 84, 4) and records["states"].dtype == np.uint8
    assert records["next_states"].shape == (n, 84, 84, 4)
    # consecutive records of one environment share frames: the stack shifts by one frame
    assert any(np.array_equal(records["states"][i, ..., 1:], records["states"][i + 2, ..., :3]) for i in range(10))


def test_stream_recycles_and_copies(records):
    stream = contenders.RecordStream(records)
    n = len(records["actions"])
    seen = 0
    while seen < n:  # chunks stop at the end of the rollout, then start again from its top
        chunk = stream.next(7)
        assert not np.shares_memory(chunk["states"], records["states"])
        np.testing.assert_array_equal(chunk["actions"], records["actions"][seen:seen + len(chunk["actions"])])
        seen += len(chunk["actions"])
    assert seen == n and stream.pos == 0
    np.testing.assert_array_equal(stream.next(3)["actions"], records["actions"][:3])


def test_structure_without_rllib(ours_only):
    r = ours_only
    assert set(r["contenders"]) == {"ours", "ours_lz4"}
    assert "left out" in r["rllib_note"]
    for name, c in r["contenders"].items():
        assert c["capacity"] == SHORT["capacity"] and 0 < c["held"] <= SHORT["capacity"]
        assert c["accounted_bytes_per_transition"] > 0
        for op in ("insert", "sample", "sample_contiguous"):
            stats = c[op]["per_cpu_s"]
            assert stats["min"] <= stats["median"] <= stats["max"] and stats["min"] > 0
            assert len(c[op]["rounds_cpu"]) == SHORT["rounds"]
        assert 1.0 <= c["frames_per_transition"] < 4.0
    # LZ4 holds the same transitions in fewer frame bytes
    assert r["contenders"]["ours_lz4"]["frame_bytes"] < r["contenders"]["ours"]["frame_bytes"]
    assert all(v is None for v in r["ratios"].values())
    statuses = {v["target"]: v["status"] for v in r["verdicts"]}
    assert statuses["sample (as returned), ours, HostFrameReplay / RLlib (compressed)"] == "not measured"
    assert statuses["sample 32 stacked transitions (as returned), ours, HostFrameReplay"] in ("met", "missed")
    assert "full_process" not in r and "build" not in r


def test_scenario_figure(ours_only, tmp_path):
    (fig,) = scenario.figures(ours_only)
    targets, rates, size = fig.tables
    assert [row[0] for row in rates.rows] == [c["title"] for c in ours_only["contenders"].values()]
    assert rates.rows[0][1] == SHORT["capacity"]
    assert [row[3] for row in targets.rows] == [v["status"] for v in ours_only["verdicts"]]
    assert size.rows[1][2] == ours_only["contenders"]["ours_lz4"]["accounted_bytes_per_transition"]
    assert fig.ratios == [] and fig.peer_missing == ours_only["rllib_note"]
    assert any(n.startswith("RLlib not measured") for n in fig.notes)
    measured = [v for v in ours_only["verdicts"] if v["status"] != "not measured"]
    assert fig.headline.startswith(f"{sum(v['status'] == 'met' for v in measured)} of {len(measured)} issue-13")
    assert plot_figure(fig, tmp_path / "frame_replay.png")
    path = tmp_path / "result.json"
    path.write_text(json.dumps(ours_only))
    assert rerender.rerender(path, SCENARIOS, ["frame_replay"]).figures[0].tables == fig.tables


def test_rllib_part_skips_cleanly_when_missing(records):
    r = frame_replay_measure.measure(records=records, rllib=True, **dict(SHORT, seconds=0.1),
                                     rllib_check=lambda *m: "ray[rllib] is not installed (test); pip install ...")
    assert set(r["contenders"]) == {"ours", "ours_lz4"}
    assert r["rllib_note"].startswith("ray[rllib] is not installed")
    assert "ray" not in r["versions"]


@pytest.mark.skipif(not HAVE_RLLIB, reason="ray[rllib] is not installed")
def test_with_rllib(records):
    r = frame_replay_measure.measure(records=records, rllib=True, rllib_uncompressed=100, **dict(SHORT, seconds=0.2))
    assert {"rllib_lz4", "rllib"} <= set(r["contenders"])
    assert r["contenders"]["rllib"]["capacity"] == 100
    assert r["ratios"]["ours/rllib_lz4 sample"] > 0 and r["rllib_note"] is None


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="PyTorch is not installed")
def test_whole_process_child_on_a_tiny_fill(records):
    (run,) = frame_replay_measure.full_process(records, ("torch",), fill_count=200, updates=1, compressions=("lz4",))
    assert run["backend"] == "torch" and run["compression"] == "lz4" and run["capacity"] == 1_000_000
    assert 0 < run["valid"] <= 200 and run["replay_bytes"] > run["frame_bytes"] > 0
    assert run["peak_rss"] >= run["rss_filled"] > 0
    assert run["replay_plus_margin"] == run["replay_bytes"] + frame_replay_measure.TARGETS["peak_margin"]
