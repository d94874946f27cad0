"""`spacegraph report`: the scenario registry, runner and writers on a tiny fake scenario, the published
baselines, and ``--quick --only build`` end to end."""

from __future__ import annotations

import html
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.measure import host
from harness.measure.figures import Figure, Panel, Ratio, Series, Table, mean_ci95
from spacegraph.report import baselines, runner, writers
from spacegraph.report.registry import Context, Scenario, select

REPO = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def fake_run(ctx: Context) -> list[Figure]:
    """Two made-up contenders at x = 1, 2, 4; the peer only when the context has peers."""
    ctx.progress.step("fake")
    panel = Panel(title="fake rate", x_label="n", y_label="per s", x_log=True)
    series = [Series("ours", [1, 2, 4], [10.0, 20.0, 40.0], lo=[9.0, 19.0, 39.0], hi=[11.0, 21.0, 41.0],
                     panel=panel.title)]
    ratios = []
    if ctx.peers:
        series.append(Series("peer", [1, 2, 4], [5.0, 10.0, 20.0], side="peer", panel=panel.title))
        ratios.append(Ratio("fake ours / peer", 2.0, ours="10/s", peer="5/s", target="> 1.0"))
    return [Figure(name="fake", title="Fake scenario", figure_ref="Fig. 0", panels=[panel], series=series,
                   ratios=ratios, tables=[Table("fake table", ["n", "ours"], [[1, 10.0], [2, 20.0]])],
                   notes=["a note"], peer_missing=None if ctx.peers else "no peer here")]


FAKE = Scenario(name="fake", title="Fake scenario", figure_ref="Fig. 0", run=fake_run)


def fake_baselines(folder: Path) -> Path:
    folder.mkdir()
    (folder / "paper.yaml").write_text(
        "source: A paper\nurl: https://example.org/paper\nbaselines:\n"
        "  - {scenario: fake, label: published, where: Table 1, hardware: a big machine, measured: rate of n,"
        " unit: per s, points: [{x: 1, y: 12}, {x: 4, y: 50}]}\n")
    return folder


def test_registry_runner_and_writers_on_a_fake_scenario(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "peers_missing", lambda: None)
    report = runner.run([FAKE], quick=True, seeds=2, peers=True, only=["fake"],
                        baseline_dir=fake_baselines(tmp_path / "baselines"), stream=None)
    paths = writers.write(report, tmp_path / "out")
    for key in ("md", "html", "json", "headline_csv", "fake_png", "fake_csv0", "fake_csv1"):
        assert paths[key].exists(), key
    assert paths["fake_png"].read_bytes().startswith(PNG_MAGIC)
    fig = report.figures[0]
    # each figure carries its command (no local paths), the revision and the machine
    assert fig.meta["command"] == ("python3 -m pip install -e '.[tf,torch,peers]' && "
                                   "spacegraph report --quick --only fake --seeds 2")
    assert str(REPO) not in fig.meta["command"] and ".venv" not in fig.meta["command"]
    assert fig.meta["revision"] == report.revision and fig.meta["machine"] == host.describe(report.machine)
    assert "load average before" in fig.meta["load"]
    assert fig.baselines[0].label == "published" and fig.baselines[0].source.startswith("A paper")
    md = paths["md"].read_text()
    for text in (fig.meta["command"], report.revision, report.machine["cpu"], "![Fake scenario](fake.png)",
                 "| fake ours / peer | 10/s | 5/s | 2 | > 1.0 | met |", "| 1 | 10 |", "a big machine",
                 "other hardware"):
        assert text in md, text
    page = paths["html"].read_text()
    assert "data:image/png;base64," in page and html.escape(fig.meta["command"]) in page
    assert "<link" not in page and 'src="http' not in page and "<script" not in page
    headline = paths["headline_csv"].read_text().splitlines()
    assert headline[0].startswith("figure,ratio") and "fake ours / peer" in headline[1]
    series_csv = paths["fake_csv1"].read_text().splitlines()
    assert series_csv[0] == "series,side,panel,x,y,lo,hi" and len(series_csv) == 1 + 6
    raw = json.loads(paths["json"].read_text())
    assert raw["figures"][0]["name"] == "fake" and raw["seeds"] == 2


def test_a_missing_peer_is_reported_and_ours_still_written(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "peers_missing", lambda: "ray[rllib] is not installed (test)")
    report = runner.run([FAKE], quick=True, seeds=1, peers=True, baseline_dir=tmp_path / "none", stream=None)
    assert report.peers_note == "ray[rllib] is not installed (test)"
    paths = writers.write(report, tmp_path / "out")
    md = paths["md"].read_text()
    assert "ray[rllib] is not installed (test)" in md and "**peer missing**: no peer here" in md
    assert "| 1 | 10 |" in md and paths["fake_png"].exists()
    assert "(no same-run ratios in this run)" in md


def test_a_failing_scenario_leaves_a_figure_saying_so(tmp_path):
    def boom(ctx):
        raise RuntimeError("broken on purpose")

    report = runner.run([Scenario("boom", "Boom", "Fig. X", boom), FAKE], quick=True, seeds=1, peers=False,
                        baseline_dir=tmp_path / "none", stream=None)
    assert [f.name for f in report.figures] == ["boom", "fake"]
    assert "FAILED: RuntimeError: broken on purpose" in report.figures[0].notes[0]
    writers.write(report, tmp_path / "out")


def test_select_and_seeds_are_checked():
    registry = {"a": FAKE, "b": FAKE}
    assert select(None, registry) == [FAKE, FAKE] and select(["b"], registry) == [FAKE]
    with pytest.raises(ValueError, match="unknown scenario.*nope.*known: a, b"):
        select(["nope"], registry)
    with pytest.raises(ValueError, match="seeds"):
        runner.run([FAKE], seeds=0, stream=None)


def test_every_registered_scenario_has_a_unique_name_and_draws_a_committed_result():
    import spacegraph.report.scenarios  # noqa: F401
    from spacegraph.report.registry import SCENARIOS

    assert list(SCENARIOS) == ["build", "act", "sampling", "replay", "frame_replay", "learning", "apex", "impala",
                               "impala_learning", "central_inference", "multi_device", "overhead", "roofline",
                               "learning_long"]
    assert all(s.render is not None for s in SCENARIOS.values())


def test_published_baselines_name_source_place_hardware_and_what_was_measured():
    loaded = baselines.load(REPO / "reports" / "baselines")   # the checkout's (tox installs the package elsewhere)
    assert {"build", "apex", "impala"} <= set(loaded)
    for entries in loaded.values():
        for b in entries:
            assert b.source and b.where and b.hardware and b.measured and b.points
            assert b.source.count("http") >= 1
    build = {b.label: b.points for b in loaded["build"]}
    assert build["RLgraph, TF 1.11"] == [{"x": "DQN agent", "y": 1000, "note": "about 1 s"}]
    assert build["RLgraph, PyTorch 0.4"][0]["y"] == 650


def test_a_malformed_baseline_names_its_file(tmp_path):
    (tmp_path / "bad.yaml").write_text("source: X\nbaselines:\n  - {scenario: s, label: l, points: []}\n")
    with pytest.raises(ValueError, match=r"bad.yaml: baselines\[0\] lacks where, hardware, measured"):
        baselines.load(tmp_path)
    (tmp_path / "bad.yaml").write_text("source: X\nbaselines:\n  - {scenario: s, label: l, where: w, hardware: h,"
                                       " measured: m, points: [{x: 1}]}\n")
    with pytest.raises(ValueError, match=r"points\[0\] needs a numeric 'y'"):
        baselines.load(tmp_path)


def test_interval_ratio_verdict_and_load_warning():
    mean, lo, hi = mean_ci95([1.0, 2.0, 3.0])
    assert mean == 2.0 and hi - mean == pytest.approx(4.303 / 3 ** 0.5, rel=1e-3) and lo == pytest.approx(4 - hi)
    assert mean_ci95([5.0]) == (5.0, 5.0, 5.0)
    assert Ratio("r", 0.96, target=">= 0.95").met is True and Ratio("r", 0.9, target=">= 0.95").met is False
    assert Ratio("r", 0.4, target="< 1.0", verdict="undetermined").met is None and Ratio("r", None).met is None
    assert host.load_warning([1.0, 1.5], cores=2) is None
    assert "reached 5.0 on 2 cores" in host.load_warning([1.0, 5.0], cores=2)


def test_quick_only_build_end_to_end(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1",
           "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                                                     os.environ.get("PYTHONPATH")]))}
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "spacegraph.cli", "report", "--quick", "--only", "build",
                           "--no-peers", "--out", str(out)], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "report written to" in proc.stdout
    md = (out / "report.md").read_text()
    assert "## Build overhead and memory (RLgraph Fig. 5a)" in md
    assert "spacegraph report --quick --only build --seeds 2 --no-peers" in md
    assert "| TF | DQN agent |" in md and "| PyTorch | single memory component |" in md
    assert "RLgraph, TF 1.11" in md  # the published baseline, beside ours
    assert (out / "build.png").read_bytes().startswith(PNG_MAGIC)
    assert "data:image/png;base64," in (out / "report.html").read_text()
    assert "5/5  build: done" in proc.stderr  # the progress bar
