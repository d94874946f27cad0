"""The multi-device scenario (issue 43): towers and processes side by side with the per-replica batch fixed, measured
in a fresh interpreter (a PyTorch run never imports TensorFlow); its figures and ratios; Ape-X's configs and a
short run with 2 replica processes; bad settings named."""

from __future__ import annotations

import copy

import pytest

from spacegraph.report.scenarios import multi_device as scenario
from spacegraph.reports import multi_device, multi_device_apex


@pytest.fixture(scope="module")
def torch_run():
    pytest.importorskip("torch")
    return multi_device.result_isolated(backend="torch", replicas=[1, 2], network="mlp", batch=3, rollouts=2,
                                        seconds=0.02, repeats=1, timeout=300)


def test_torch_run_measures_single_towers_and_processes_with_the_per_replica_batch_fixed(torch_run):
    assert torch_run["tensorflow_imported"] is False and torch_run["format"] == multi_device.FORMAT
    assert torch_run["threads"]["torch"] == {"intra_op": 1, "inter_op": 1}
    got = [(r["loss"], r["setting"], r["rows_per_update"], r["samples_per_update"]) for r in torch_run["rows"]]
    assert got == [("dqn", "single", 3, 3), ("dqn", "towers 1", 3, 3), ("dqn", "towers 2", 6, 6),
                   ("dqn", "processes 2", 6, 6), ("impala", "single", 2, 10), ("impala", "towers 1", 2, 10),
                   ("impala", "towers 2", 4, 20), ("impala", "processes 2", 4, 20)]
    for r in torch_run["rows"]:
        assert r["updates_per_s"] > 0 and r["samples_per_s"] == pytest.approx(r["updates_per_s"] * r["samples_per_update"])
    processes = [r["strategy"] for r in torch_run["rows"] if r["mode"] == "processes"]
    assert all(s["mode"] == "processes" and s["replicas"] == 2 for s in processes)


def _nature(run: dict) -> dict:
    """``run`` as if measured on the Nature CNN, with known rates: single 10 updates/s, towers 2 7, processes 2 9."""
    run = copy.deepcopy(run)
    run["network"] = "nature"
    for r in run["rows"]:
        r["network"] = "nature"
        r["updates_per_s"] = {"single": 10.0, "towers 1": 9.0, "towers 2": 7.0, "processes 2": 9.0}[r["setting"]]
        r["samples_per_s"] = r["updates_per_s"] * r["samples_per_update"]
    return run


def test_figure_gives_each_setting_over_single_and_the_goal_on_dqn_processes(torch_run):
    result = {"format": 2, "throughput": [_nature(torch_run)], "apex": None}
    (fig,) = scenario.figures(result)
    assert [r.name.split(" / ")[0] for r in fig.ratios] == ["torch dqn: towers 2", "torch dqn: processes 2",
                                                            "torch impala: towers 2", "torch impala: processes 2"]
    goal = [r for r in fig.ratios if r.target]
    assert len(goal) == 1 and goal[0].name.startswith("torch dqn: processes 2") and goal[0].target == ">= 1.7"
    assert goal[0].value == pytest.approx(9.0 * 6 / (10.0 * 3)) and goal[0].met is True
    assert fig.headline == f"{goal[0].name}: 1.80 (target >= 1.7)"
    rows = {(r[1], r[2]): r for r in fig.tables[0].rows}
    assert rows[("impala", "towers 2")][-1] == pytest.approx(7.0 * 20 / (10.0 * 10))
    assert [p.title for p in fig.panels] == ["dqn (nature): samples/s against replicas",
                                             "impala (nature): samples/s against replicas"]
    processes = [s for s in fig.series if s.label == "torch processes" and s.panel.startswith("dqn")]
    assert processes[0].x == [1, 2] and processes[0].y == [30.0, 54.0]  # 1 replica is the plain graph
    assert "N x 3 rows" in fig.notes[0]


def test_tf_towers_group_is_labelled_with_its_inter_op_threads(torch_run):
    part = _nature(torch_run)
    part["backend"], part["threads"] = "tf", {**part["threads"], "tf": {"intra_op": 1, "inter_op": 2}}
    (fig,) = scenario.figures({"format": 2, "throughput": [part], "apex": None})
    assert fig.ratios[0].name.startswith("tf (TF inter-op 2) dqn: towers 2")


def _apex_run(replicas: int, seed: int, time_to_target: float | None) -> dict:
    history = [{"env_steps": 2000, "train_s": 5.0, "eval_return": 50.0, "updates": 100},
               {"env_steps": 4000, "train_s": 12.0, "eval_return": 210.0, "updates": 300}]
    return {"replicas": replicas, "seed": seed, "batch_size": 64 * replicas, "time_to_target_s": time_to_target,
            "steps_to_target": 4000 if time_to_target else None, "stop_reason": "target_return",
            "history": history}


def test_apex_figure_gives_one_replica_time_over_two(torch_run):
    apex = {"backend": "torch", "batch": 64, "target_return": 200.0, "max_seconds": 60.0, "eval_every": 2000,
            "eval_episodes": 10, "screen_episodes": 5, "seeds": [0, 1], "load_average": [1.0, 1.0, 1.0],
            "runs": [_apex_run(1, 0, 20.0), _apex_run(2, 0, 10.0), _apex_run(1, 1, 30.0), _apex_run(2, 1, None)]}
    figs = scenario.figures({"format": 2, "throughput": [_nature(torch_run)], "apex": apex})
    fig = figs[1]
    assert fig.name == "multi_device_apex" and fig.ratios[0].value == pytest.approx(25.0 / 10.0)
    assert [s.label for s in fig.series] == ["1 replica, seed 0", "2 replicas, seed 0", "1 replica, seed 1",
                                             "2 replicas, seed 1"]
    assert fig.tables[0].rows[3][3] == "not reached in 60 s"
    apex["runs"] = [_apex_run(1, 0, 20.0), _apex_run(2, 0, None)]
    fig = scenario.figures({"format": 2, "throughput": [_nature(torch_run)], "apex": apex})[1]
    assert fig.ratios[0].value is None and fig.headline.endswith("(1 replica: 20.0 s; 2: not reached)")


def test_apex_configs_fix_the_per_replica_batch():
    one = multi_device_apex.apex_config(1, 3, "torch", 32)
    two = multi_device_apex.apex_config(2, 3, "torch", 32)
    assert (one.update.batch_size, two.update.batch_size) == (32, 64) and one.seed == two.seed == 3
    assert one.execution.strategy == "local"
    strategy = two.execution.strategy
    strategy = strategy if isinstance(strategy, dict) else strategy.model_dump()
    assert (strategy["replicas"], strategy["mode"]) == (2, "processes")


def test_a_short_apex_run_with_two_replica_processes_records_its_strategy():
    pytest.importorskip("torch")
    run = multi_device_apex.run_isolated(timeout=300, replicas=2, seed=0, max_seconds=3.0, eval_every=500,
                                         eval_episodes=2, screen_episodes=1, target_return=10_000.0)
    assert run["strategy"]["mode"] == "processes" and run["strategy"]["replicas"] == 2
    assert run["batch_size"] == 128 and run["history"] and run["time_to_target_s"] is None
    assert run["stop_reason"] in ("max_seconds", "steps")


@pytest.mark.parametrize("kwargs, message", [
    ({"backend": "jax"}, "backend: expected tf or torch; got 'jax'"),
    ({"backend": "torch", "losses": ["ppo"]}, "losses: expected some of dqn, impala"),
    ({"backend": "torch", "modes": ["threads"]}, "modes: expected some of towers, processes; got \\['threads'\\]"),
    ({"backend": "torch", "network": "resnet"}, "network: expected one of mlp, nature; got 'resnet'"),
    ({"backend": "torch", "batch": 0}, "batch: expected a positive int; got 0"),
    ({"backend": "torch", "replicas": [0]}, "replicas: expected positive ints; got \\[0\\]"),
])
def test_bad_settings_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        multi_device.result(**kwargs)
    with pytest.raises(ValueError, match=message):  # from the child, as one line
        multi_device.result_isolated(timeout=120, **kwargs)


def test_over_single_is_the_setting_over_the_same_runs_single(torch_run):
    rows = _nature(torch_run)["rows"]
    assert multi_device.over_single(rows, "dqn", "processes 2") == pytest.approx(9.0 * 6 / (10.0 * 3))
    assert multi_device.over_single(rows, "impala", "towers 2") == pytest.approx(7.0 * 20 / (10.0 * 10))
    with pytest.raises(KeyError, match="no 'dqn' rows for 'processes 4' and 'single'"):
        multi_device.over_single(rows, "dqn", "processes 4")
