"""The learning regression suite (spacegraph/reports/learning_long.py, the learning_long report scenario): stop
criteria on recorded rows, targets read from the published curves, one real run stopped at its target, the
report drawn from a recorded result, and the learning-long marker kept out of every run that does not name it."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spacegraph.report import baselines
from spacegraph.reports.learning_long import outcome, point, read_rows, run_line, run_reference, train_command
from spacegraph.reports.learning_long_runs import StopCriteria, published_target, quick_runs, reference_runs

REPO = Path(__file__).resolve().parents[2]
STOP = StopCriteria(target_return=10.0, frames=1000, seconds=60.0, min_episodes=5)


def pt(frames, seconds, episodes, ret):
    return {"frames": frames, "seconds": seconds, "train_seconds": seconds * 0.9, "episodes": episodes,
            "return_100": ret}


def test_the_first_point_at_the_target_with_enough_episodes_gives_frames_and_time_to_target():
    points = [pt(200, 5.0, 3, 50.0), pt(400, 9.0, 6, 9.9), pt(600, 14.0, 9, 10.0), pt(800, 20.0, 12, 30.0)]
    got = outcome(points, STOP)
    assert got["reached"] and got["stop_reason"] == "target"            # not at 200: only 3 episodes
    assert (got["frames_to_target"], got["seconds_to_target"], got["train_seconds_to_target"]) == (600, 14.0, 12.6)
    assert got["best_return_100"] == 50.0


@pytest.mark.parametrize("last, why", [(pt(1000, 30.0, 40, 8.0), "frames"), (pt(700, 61.0, 40, 8.0), "seconds"),
                                       (pt(700, 30.0, 40, 8.0), "stopped early")])
def test_a_run_short_of_the_target_says_why_it_stopped_and_where_it_stood(last, why):
    got = outcome([pt(300, 10.0, 10, None), last], STOP)
    assert not got["reached"] and got["stop_reason"] == why and got["last"] == last
    assert got["frames_to_target"] is None and got["seconds_to_target"] is None
    assert outcome([], STOP)["stop_reason"] == "stopped early"


def test_stop_criteria_are_checked_by_name():
    with pytest.raises(ValueError, match="StopCriteria: frames must be a positive number; got 0"):
        StopCriteria(1.0, 0, 10.0)
    with pytest.raises(ValueError, match="target_return must be a finite number; got nan"):
        StopCriteria(float("nan"), 10, 10.0)


def test_targets_are_the_published_curve_at_the_frame_budget():
    published = baselines.load(REPO / "reports" / "baselines")
    runs = {r.name: r for r in reference_runs(published)}
    assert runs["dqn_minatar_breakout_torch"].stop.target_return == 10.0          # 10.0 at 5M frames
    assert runs["dqn_minatar_freeway_tf"].stop.target_return == 50.2
    assert runs["apex_minatar_space_invaders"].args == ("--executor", "ray", "--workers", "2", "--shards", "2")
    assert runs["dqn_minatar_breakout_torch"].env_id == "MinAtar/Breakout-v0"
    pong = runs["impala_pong"].stop
    assert (pong.target_return, pong.frames, pong.seconds, pong.min_episodes) == (18.0, 10_000_000, 5400.0, 100)
    apex_pong = runs["apex_pong"]
    assert (apex_pong.stop.target_return, apex_pong.stop.frames, apex_pong.stop.seconds) == (18.0, 40_000_000, 7200.0)
    assert apex_pong.figure == "learning_long_pong" and apex_pong.args[:2] == ("--executor", "ray")
    shorter = {r.name: r for r in reference_runs(published, frames=2_500_000)}
    assert shorter["dqn_minatar_breakout_tf"].stop.target_return == 9.8             # between 9.6 (2M) and 10.0 (3M)
    assert published_target([{"x": 1, "y": 2.0}, {"x": 3, "y": 6.0}], 2_000_000) == 4.0
    with pytest.raises(ValueError, match="6,000,000 frames lies outside the published points"):
        reference_runs(published, frames=6_000_000)
    with pytest.raises(ValueError, match="no published curve for learning_long_minatar_breakout"):
        reference_runs({})


def test_the_train_command_budgets_frames_as_steps_and_time_as_max_seconds(tmp_path):
    run = quick_runs()[0]
    cmd = train_command(run, 3, "cfg.yaml", tmp_path, steps=4000)
    assert cmd[3:6] == ["train", "cfg.yaml", "--backend"] and cmd[cmd.index("--steps") + 1] == "4000"
    assert cmd[cmd.index("--max-seconds") + 1] == "60.0" and cmd[cmd.index("--seed") + 1] == "3"


def test_a_point_keeps_the_learning_diagnostics_its_row_holds():
    row = {"frames": 4000, "wall_s": 12.345, "train_s": 11.0, "episodes": 30, "train_return_100": -20.5,
           "policy_entropy": 1.7654321, "grad_norm": 38.123456, "policy_lag": None}
    assert point(row) == {"frames": 4000, "seconds": 12.35, "train_seconds": 11.0, "episodes": 30,
                          "return_100": -20.5, "policy_entropy": 1.7654, "grad_norm": 38.1235}


def test_rows_are_read_whole_lines_only(tmp_path):
    path = tmp_path / "metrics.jsonl"
    assert read_rows(path) == []
    path.write_text(json.dumps({"frames": 1}) + "\n" + '{"frames": 2, "wall')
    assert read_rows(path) == [{"frames": 1}]


def test_a_run_stops_at_its_target_with_ctrl_c_and_records_where(tmp_path):
    # a random CartPole policy returns ~20: a target of 12 is reached at the first evaluation
    run = dataclasses.replace(quick_runs()[0], stop=StopCriteria(12.0, 20_000, 120.0, min_episodes=5), eval_every=500)
    record = run_reference(run, 0, folder=tmp_path, poll_s=0.5)
    assert "error" not in record, record.get("log_tail")
    assert record["reached"] and record["stop_reason"] == "target" and record["frames_to_target"] == 500
    assert record["exit_status"] == 130                                 # stopped by Ctrl-C, far before 20,000
    assert record["points"][0]["frames"] == 500 and record["measured"]["commit"]
    # no update before DQN's 1,000th step, and DQN has no policy entropy: the point keeps no diagnostics
    assert not set(record["points"][0]) & {"grad_norm", "policy_entropy", "policy_lag"}
    assert record["config_values"]["agent"] == "dqn" and record["config_values"]["env"]["id"] == "CartPole-v1"
    assert (tmp_path / "dqn_cartpole_quick_torch-seed0" / "checkpoint").is_dir()
    assert "reached 12 at 500 frames" in run_line(record)


def recorded_result():
    """Two seeds of a reached / not-reached run and a failed one, as `measure` records them."""
    measured = {"date": "2026-11-29T17:00:00+00:00", "commit": "abc123def456789+dirty", "machine": "vm", "cpus": 2}
    stop = dataclasses.asdict(StopCriteria(10.0, 5_000_000, 21600.0))
    base = {"figure": "learning_long_minatar_breakout", "stop": stop, "measured": measured, "error": None,
            "target_source": "Young & Tian 2019 DQN at 5M frames"}
    reached = {**base, "name": "dqn_minatar_breakout_torch", "seed": 0, "reached": True, "frames_to_target": 1_200_000,
               "seconds_to_target": 3000.0, "best_return_100": 10.4, "stop_reason": "target",
               "points": [pt(600_000, 1500.0, 900, 8.1), pt(1_200_000, 3000.0, 1800, 10.4)]}
    reached["last"] = reached["points"][-1]
    short = {**base, "name": "dqn_minatar_breakout_torch", "seed": 1, "reached": False, "frames_to_target": None,
             "seconds_to_target": None, "best_return_100": 9.1, "stop_reason": "frames",
             "points": [pt(5_000_000, 12000.0, 9000, 9.1)]}
    short["last"] = short["points"][-1]
    failed = {**base, "name": "apex_minatar_breakout", "seed": 0, "reached": False, "points": [], "last": None,
              "stop_reason": "stopped early", "best_return_100": None, "error": "exited with status 1 before its "
                                                                                 "first point"}
    return {"runs": [reached, short, failed], "criteria": {}}


def test_the_report_draws_a_recorded_result_with_targets_outcomes_and_the_published_curve(tmp_path):
    import spacegraph.report.scenarios  # noqa: F401 - registers the scenarios
    from spacegraph.report import rerender, writers
    from spacegraph.report.registry import SCENARIOS

    path = tmp_path / "result.json"
    path.write_text(json.dumps(recorded_result()))
    report = rerender.rerender(path, SCENARIOS, only=["learning_long"], baseline_dir=REPO / "reports" / "baselines")
    (fig,) = report.figures
    assert fig.name == "learning_long_minatar_breakout" and [p.title for p in fig.panels] == [
        "return against env frames", "return against wall time"]
    assert [b.label for b in fig.baselines] == ["Young & Tian 2019 DQN (30 runs)"]
    rows = {(r[0], r[1]): r for r in fig.tables[0].rows}
    assert rows[("dqn_minatar_breakout_torch", 0)][5:8] == ["reached", "1,200,000", "50.0 min"]
    assert rows[("dqn_minatar_breakout_torch", 1)][5] == ("not reached (frames): stood at 9.1 after 5,000,000 "
                                                          "frames, 200.0 min")
    assert rows[("apex_minatar_breakout", 0)][5] == "failed: exited with status 1 before its first point"
    assert rows[("apex_minatar_breakout", 0)][9] == "2026-11-29T17:00:00+00:00, abc123def456+dirty, vm (2 CPUs)"
    assert "**dqn_minatar_breakout_torch**: 1 of 2 seeds reached the target (2 of 2 required: not met)" in fig.notes[1]
    target = next(s for s in fig.series if s.label == "target of dqn_minatar_breakout_torch")
    assert target.x == [0, 5.0] and target.y == [10.0, 10.0]
    curve = next(s for s in fig.series
                 if s.label == "dqn_minatar_breakout_torch seed 0" and s.panel == fig.panels[1].title)
    assert curve.x == [25.0, 50.0] and curve.y == [8.1, 10.4]
    assert fig.meta["revision"] == "abc123def456789+dirty" and fig.headline == "1 of 3 runs reached their target"
    paths = writers.write(report, tmp_path / "out")
    assert "frames to target" in paths["md"].read_text()


def test_the_report_draws_the_policy_entropy_and_lag_where_the_points_hold_them(tmp_path):
    import spacegraph.report.scenarios  # noqa: F401 - registers the scenarios
    from spacegraph.report import rerender
    from spacegraph.report.registry import SCENARIOS

    result = recorded_result()
    reached = result["runs"][0]
    reached["points"] = [dict(p, policy_entropy=e, policy_lag=lag)
                         for p, e, lag in zip(reached["points"], [1.7, 1.2], [6.5, 7.0])]
    path = tmp_path / "result.json"
    path.write_text(json.dumps(result))
    (fig,) = rerender.rerender(path, SCENARIOS, only=["learning_long"], baseline_dir=REPO / "reports" / "baselines").figures
    assert [p.title for p in fig.panels][2:] == ["policy entropy against env frames", "policy lag against env frames"]
    entropy, = [s for s in fig.series if s.panel == fig.panels[2].title]   # the one run whose points hold it
    assert entropy.label == "dqn_minatar_breakout_torch seed 0" and entropy.x == [0.6, 1.2] and entropy.y == [1.7, 1.2]


def test_a_record_with_its_processor_names_it_before_the_host():
    from spacegraph.report.scenarios.learning_long import machine_of, measured_when

    m = {"processor": "AMD EPYC", "cpus": 2, "machine": "vm", "commit": "abc", "date": "d"}
    assert machine_of(m) == "AMD EPYC, 2 CPUs (host vm)"
    assert measured_when([{"measured": m}, {"measured": {**m, "processor": None}}])["machine"] == (
        "2 values: AMD EPYC, 2 CPUs (host vm), vm (2 CPUs)")


MARKED = '''import pytest

@getattr(pytest.mark, "learning-long")
def test_long(): pass

@pytest.mark.learning
def test_learning(): pass

def test_plain(): pass
'''


@pytest.mark.parametrize("expression, selected", [(None, ["test_plain"]),
                                                  ("learning or distributed", ["test_learning"]),
                                                  ("learning-long", ["test_long"]), ("learning", ["test_learning"])])
def test_learning_long_runs_only_when_the_expression_names_it(tmp_path, expression, selected):
    (tmp_path / "conftest.py").write_text((REPO / "suites" / "conftest.py").read_text())
    (tmp_path / "test_marked.py").write_text(MARKED)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    learning-long: x\n    learning: x\n"
                                         "    distributed: x\naddopts = --strict-markers -p no:cacheprovider\n")
    args = [sys.executable, "-m", "pytest", "--collect-only", "-q", *(["-m", expression] if expression else [])]
    out = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(REPO)}).stdout
    assert sorted(line.split("::")[-1] for line in out.splitlines() if "::" in line) == selected, out


def test_a_seed_run_again_counts_once_as_its_latest_run_and_its_curves_are_told_apart(tmp_path):
    import spacegraph.report.scenarios  # noqa: F401 - registers the scenarios
    from spacegraph.report import rerender

    result = recorded_result()
    first, again = result["runs"][1], dict(result["runs"][0])   # seed 1 did not reach; run it again, and it does
    again.update(seed=1, measured={**first["measured"], "date": "2026-11-30T01:00:00+00:00", "commit": "fedcba987654"})
    result["runs"].insert(2, again)
    path = tmp_path / "result.json"
    path.write_text(json.dumps(result))
    from spacegraph.report.registry import SCENARIOS

    (fig,) = rerender.rerender(path, SCENARIOS, only=["learning_long"], baseline_dir=REPO / "reports" / "baselines").figures
    assert ("**dqn_minatar_breakout_torch**: 2 of 2 seeds reached the target (2 of 2 required: met); each seed "
            "counted by its latest run (1 earlier run of a seed left out)") in fig.notes[1]
    assert fig.headline == "2 of 3 runs reached their target (each seed's latest run; 1 earlier run left out)"
    labels = {s.label for s in fig.series if s.panel == fig.panels[0].title and s.side == "ours"}
    assert {"dqn_minatar_breakout_torch seed 1 (abc123d)", "dqn_minatar_breakout_torch seed 1 (fedcba9)",
            "dqn_minatar_breakout_torch seed 0"} <= labels


def test_a_peer_run_from_a_learning_record_is_drawn_beside_the_reference_runs(tmp_path):
    import spacegraph.report.scenarios  # noqa: F401 - registers the scenarios
    from spacegraph.report import rerender
    from spacegraph.report.registry import SCENARIOS
    from spacegraph.reports.learning_long import add_peer, load_result, main, peer_run

    pts = [{"seconds": s, "frames": 1000.0 * s, "mean_return_100": r, "episodes": int(s // 10)}
           for s, r in [(10, None), (30, -20.7), (50, -20.6), (95, -20.4), (130, -20.1)]]
    record = {"date": "2026-11-27", "commit": "c8b8e33", "machine": "vm",
              "sides": {"ours": {"points": []}, "rllib": {"points": pts, "measured": {"commit": "df3537c"}}}}
    (tmp_path / "rec.json").write_text(json.dumps(record))
    peer = peer_run(tmp_path / "rec.json", "rllib", "learning_long_minatar_breakout", "RLlib", every_s=60)
    assert [p["seconds"] for p in peer["points"]] == [30, 95] and peer["points"][1]["frames"] == 95_000
    assert peer["measured"] == {"date": "2026-11-27", "commit": "df3537c", "machine": "vm"}
    with pytest.raises(ValueError, match=r"rec.json: expected a learning record with sides.peer.points.*'ours', 'rllib'"):
        peer_run(tmp_path / "rec.json", "peer", "f", "x")
    with pytest.raises(ValueError, match="sides.ours has no point with a last-100 mean"):
        peer_run(tmp_path / "rec.json", "ours", "f", "x")

    path = tmp_path / "result.json"
    path.write_text(json.dumps(recorded_result()))
    assert main(["--result", str(path), "--add-peer", str(tmp_path / "rec.json"), "rllib",
                 "learning_long_minatar_breakout", "RLlib"]) == 0
    add_peer(load_result(path), dict(peer, label="RLlib"), path)            # the same label again: replaced
    assert [p["label"] for p in load_result(path)["peers"]] == ["RLlib"]
    (fig,) = rerender.rerender(path, SCENARIOS, only=["learning_long"], baseline_dir=REPO / "reports" / "baselines").figures
    frames, wall = (next(s for s in fig.series if s.label == "RLlib" and s.panel == p.title) for p in fig.panels[:2])
    assert frames.side == wall.side == "peer" and frames.x == [0.03, 0.095] and wall.y == [-20.7, -20.4]
    assert any(n.startswith("Peer run: RLlib, -20.4 after 95,000 frames") for n in fig.notes)


def test_a_variant_sets_config_keys_and_counts_apart_from_the_reference_run(tmp_path):
    from reference_agents.agents.config import ConfigError
    from spacegraph.reports.learning_long import run_config, set_key
    from spacegraph.reports.learning_long_runs import with_overrides

    runs = {r.name: r for r in reference_runs()}
    variant = with_overrides(runs["impala_pong"], [("loss.normalize_advantages", True), ("loss.entropy_cost", 0.001)])
    assert variant.name == "impala_pong[loss.normalize_advantages=true,loss.entropy_cost=0.001]"
    assert (variant.figure, variant.stop, variant.args) == (runs["impala_pong"].figure, runs["impala_pong"].stop,
                                                            runs["impala_pong"].args)
    path, values = run_config(variant, tmp_path)
    assert Path(path).parent == tmp_path and values["loss"]["normalize_advantages"] is True
    assert values["loss"]["entropy_cost"] == 0.001 and values["loss"]["rho_bar"] == 1.0   # the rest as shipped
    with pytest.raises(ConfigError, match="loss.entropy_cost"):
        run_config(with_overrides(runs["impala_pong"], [("loss.entropy_cost", -1)]), tmp_path)
    with pytest.raises(ValueError, match="config key optimiser.lr: optimiser is not a section"):
        set_key({"optimizer": {}}, "optimiser.lr", 1.0)
    assert with_overrides(runs["impala_pong"], []) is runs["impala_pong"]
    from spacegraph.reports.learning_long import main

    assert main(["--run", "impala_pong", "--result", str(tmp_path / "r.json"), "--set", "loss.entropy_cost"]) == 2
    assert not (tmp_path / "r.json").exists()


def test_a_note_written_by_hand_is_drawn_on_the_figure_it_names_only(tmp_path, capsys):
    import spacegraph.report.scenarios  # noqa: F401 - registers the scenarios
    from spacegraph.report import rerender
    from spacegraph.report.registry import SCENARIOS
    from spacegraph.reports.learning_long import add_peer, load_result, main

    result = recorded_result()
    other = dict(result["runs"][0], figure="learning_long_minatar_freeway", name="dqn_minatar_freeway_torch")
    result["runs"].append(other)
    result["notes"] = ["an older note, on every figure"]
    path = tmp_path / "result.json"
    path.write_text(json.dumps(result))
    assert main(["--result", str(path), "--add-note", "learning_long_minatar_freeway", "tests ran beside it"]) == 0
    assert load_result(path)["notes"][-1] == {"figures": ["learning_long_minatar_freeway"],
                                              "text": "tests ran beside it"}
    assert main(["--result", str(path), "--add-note", "learning_long_pong", "x"]) == 2   # no run drawn there
    assert ("no run of the result is drawn on figure 'learning_long_pong'; its figures: "
            "learning_long_minatar_breakout, learning_long_minatar_freeway") in capsys.readouterr().err
    add_peer(load_result(path), {"figure": "learning_long_pong", "label": "RLlib", "points": []}, path)
    assert main(["--result", str(path), "--add-note", "learning_long_pong", "x"]) == 2   # a peer alone draws none
    assert len(load_result(path)["notes"]) == 2
    figs = {f.name: f for f in rerender.rerender(path, SCENARIOS, only=["learning_long"],
                                                 baseline_dir=REPO / "reports" / "baselines").figures}
    hand = {name: [n for n in f.notes if n.startswith("Note written by hand")] for name, f in figs.items()}
    assert hand == {"learning_long_minatar_breakout": ["Note written by hand after the run: an older note, on every "
                                                       "figure"],
                    "learning_long_minatar_freeway": ["Note written by hand after the run: an older note, on every "
                                                      "figure",
                                                      "Note written by hand after the run: tests ran beside it"]}


def test_a_variant_draws_its_curve_but_not_a_second_copy_of_its_reference_runs_target(tmp_path):
    import spacegraph.report.scenarios  # noqa: F401 - registers the scenarios
    from spacegraph.report import rerender
    from spacegraph.report.registry import SCENARIOS

    result = recorded_result()
    result["runs"].append(dict(result["runs"][0], name="dqn_minatar_breakout_torch[update.batch_size=64]"))
    path = tmp_path / "result.json"
    path.write_text(json.dumps(result))
    (fig,) = rerender.rerender(path, SCENARIOS, only=["learning_long"], baseline_dir=REPO / "reports" / "baselines").figures
    assert sorted(s.label for s in fig.series if s.side == "reference") == [
        "target of apex_minatar_breakout", "target of dqn_minatar_breakout_torch"]
    assert any(s.label.startswith("dqn_minatar_breakout_torch[update.batch_size=64]") for s in fig.series)
