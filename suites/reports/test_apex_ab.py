"""`spacegraph.reports.apex_ab`: paired per-round ratios and the baseline export (no Ape-X runs here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from spacegraph.reports import apex_ab


def point(frames_per_s, updates_per_s, cpu_seconds, frames):
    return {"frames_per_s": frames_per_s, "updates_per_s": updates_per_s, "cpu_seconds": cpu_seconds,
            "frames": frames}


def test_summary_pairs_each_round_and_takes_medians():
    runs = [{"round": 0, "side": "old", "point": point(100.0, 10.0, 40.0, 2000)},
            {"round": 0, "side": "new", "point": point(150.0, 30.0, 40.0, 4000)},
            {"round": 1, "side": "old", "point": point(50.0, 5.0, 20.0, 1000)},   # a loaded round: paired
            {"round": 1, "side": "new", "point": point(100.0, 5.0, 20.0, 1000)},
            {"round": 2, "side": "old", "point": point(80.0, 8.0, 10.0, 1000)},
            {"round": 2, "side": "new", "point": {"skipped": "exit 1"}}]
    out = apex_ab.summary(runs)
    assert out["rounds"][0] == {"round": 0, "frames_per_s": 1.5, "updates_per_s": 3.0, "cpu_per_frame": 0.5}
    assert out["rounds"][1] == {"round": 1, "frames_per_s": 2.0, "updates_per_s": 1.0, "cpu_per_frame": 1.0}
    assert out["rounds"][2] == {"round": 2}     # a skipped run gives no ratio
    assert out["median_frames_per_s_ratio"] == 1.75
    assert out["median_updates_per_s_ratio"] == 2.0 and out["median_cpu_per_frame_ratio"] == 0.75


def test_a_bad_ref_is_named(tmp_path, capsys):
    with pytest.raises(SystemExit):
        apex_ab.main(["--old", "no-such-ref-h4", "--rounds", "1"])
    assert "--old 'no-such-ref-h4' is not a git ref" in capsys.readouterr().err


def test_export_ref_writes_that_commits_tree(tmp_path):
    # the checkout these tests are in (tox installs the package into site-packages, which is no git checkout)
    apex_ab.export_ref("HEAD", tmp_path, repo=Path(__file__).resolve().parents[2])
    assert (tmp_path / "spacegraph" / "reports" / "apex_throughput.py").is_file()
