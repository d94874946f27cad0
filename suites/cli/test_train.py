"""`spacegraph train` and `Trainer`: run files and their columns, Ctrl-C checkpoints, resume, errors, early stop."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import yaml

from spacegraph.cli import main
from reference_agents.agents import DQNAgent, build_agent
from reference_agents.training import ProgressBar, Trainer
from suites.doubles import FakeClock, TextSink

METRIC_COLUMNS = ["env_steps", "frames", "wall_s", "train_s", "eval_s", "steps_per_s", "frames_per_s", "episodes",
                  "train_return_100", "eval_return", "eval_episodes", "screen_return", "solved", "epsilon", "updates",
                  "last_loss", "policy_entropy", "grad_norm", "policy_lag"]
EPISODE_COLUMNS = ["episode", "env_id", "return", "length", "terminated", "truncated", "end_step", "end_frame"]

# A small CartPole DQN: updates every 4 env steps after 100, evaluation every 200 steps.
TINY = {
    "agent": "dqn", "backend": "torch", "seed": 1,
    "env": {"id": "CartPole-v1", "num_envs": 1},
    "network": {"layers": [{"type": "dense", "units": 16, "activation": "relu"}]},
    "memory": {"type": "replay", "capacity": 5000},
    "exploration": {"type": "linear", "from": 1.0, "to": 0.1, "steps": 400},
    "update": {"batch_size": 16, "start_after": 100, "every": 4, "repeats": 1},
    "target_sync": {"every": 50},
    "evaluation": {"every": 200, "episodes": 2},
}


def updates_due(steps: int) -> int:
    """The updates TINY's schedule runs in ``steps`` env steps (one every 4 from step 100 on)."""
    return (steps - 100) // 4 + 1


def write_config(folder, name="tiny", **changes) -> str:
    config = json.loads(json.dumps(TINY))
    for key, value in changes.items():
        config[key] = {**config[key], **value} if isinstance(value, dict) else value
    path = os.path.join(folder, f"{name}.yaml")
    with open(path, "w") as fh:
        yaml.safe_dump(config, fh)
    return path


def read_csv(path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        return list(reader.fieldnames), list(reader)


def read_jsonl(path) -> list[dict]:
    with open(path) as fh:
        return [json.loads(line) for line in fh]


def checkpoint_counts(run_dir) -> dict[str, int]:
    """Counters of the checkpoint in ``run_dir``, read back by rebuilding the agent from it."""
    ckpt = os.path.join(run_dir, "checkpoint")
    agent = DQNAgent.load_checkpoint(ckpt)
    with open(os.path.join(ckpt, "worker.json")) as fh:
        worker = json.load(fh)
    return {"agent_steps": agent.timesteps, "worker_steps": worker["total_steps"], "updates": agent.updates,
            "worker_updates": worker["total_updates"], "replay": agent.memory_size(),
            "episodes": len(worker["episodes"]), "resets": worker["resets"]}


def check_run_files(run_dir, env_steps: list[int], total: int | None = None) -> tuple[list[dict], list[dict]]:
    """Checks the metric and episode files of a run (``total`` env steps, default the last row's)
    against each other; returns their rows."""
    header, rows = read_csv(os.path.join(run_dir, "metrics.csv"))
    assert header == METRIC_COLUMNS
    assert [int(r["env_steps"]) for r in rows] == env_steps
    lines = read_jsonl(os.path.join(run_dir, "metrics.jsonl"))
    assert [list(line) for line in lines] == [METRIC_COLUMNS] * len(rows)
    for row, line in zip(rows, lines):
        for key in METRIC_COLUMNS:
            if line[key] is None:
                assert row[key] == "", key
            else:
                assert float(row[key]) == pytest.approx(line[key]), key
    ep_header, episodes = read_csv(os.path.join(run_dir, "episodes.csv"))
    assert ep_header == EPISODE_COLUMNS
    assert [int(e["episode"]) for e in episodes] == list(range(len(episodes)))
    ends = [int(e["end_step"]) for e in episodes]
    assert ends == sorted(set(ends)) and ends[-1] <= (total or env_steps[-1])
    for row in rows:  # each row counts the episodes that ended by its step
        assert int(row["episodes"]) == sum(end <= int(row["env_steps"]) for end in ends)
        assert int(row["frames"]) == int(row["env_steps"])  # CartPole: one frame per step
    walls = [float(r["wall_s"]) for r in rows]
    assert walls == sorted(walls) and walls[0] > 0
    with open(os.path.join(run_dir, "learning_curve.png"), "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
    return rows, episodes


def test_train_writes_metrics_episodes_curve_and_checkpoint(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", write_config(tmp_path), "--steps", "500", "--out", str(out), "--quiet"]) == 0
    summary = capsys.readouterr().out
    assert "env steps     500 of 500 (frames 500)" in summary
    assert "stopped       the step total was reached" in summary
    rows, episodes = check_run_files(out, [200, 400, 500])
    assert sum(int(e["length"]) for e in episodes) <= 500
    assert all(int(e["terminated"]) + int(e["truncated"]) == 1 for e in episodes)
    assert [int(r["updates"]) for r in rows] == [updates_due(200), updates_due(400), updates_due(500)]
    eps = [float(r["epsilon"]) for r in rows]
    assert eps[0] == pytest.approx(1.0 - 0.9 * 200 / 400, abs=1e-5) and eps[1:] == pytest.approx([0.1, 0.1])
    assert all(int(r["eval_episodes"]) == 2 and float(r["eval_return"]) > 0 for r in rows)
    assert all(math.isfinite(float(r["last_loss"])) for r in rows)
    assert sorted(os.listdir(out / "checkpoint")) == ["agent_replay.npz", "agent_state.npz", "agent_variables.npz",
                                                      "trainer.json", "worker.json"]
    assert checkpoint_counts(out) == {"agent_steps": 500, "worker_steps": 500, "updates": updates_due(500),
                                      "worker_updates": updates_due(500), "replay": 500,
                                      "episodes": len(episodes), "resets": 1}


def test_ctrl_c_leaves_a_checkpoint_and_resume_continues_to_the_total(tmp_path, capsys):
    run = tmp_path / "run"
    agent = build_agent(write_config(tmp_path))

    def interrupt_at_300(trainer, stats):
        if trainer.worker.total_steps >= 300:
            raise KeyboardInterrupt

    trainer = Trainer(agent, run, callback=interrupt_at_300)
    with pytest.raises(KeyboardInterrupt):
        trainer.train(700)
    assert trainer.result.stop_reason == "interrupted" and trainer.result.checkpoint == str(run / "checkpoint")
    check_run_files(run, [200], total=300)
    before = checkpoint_counts(run)
    assert before == {"agent_steps": 300, "worker_steps": 300, "updates": updates_due(300),
                      "worker_updates": updates_due(300), "replay": 300, "episodes": before["episodes"],
                      "resets": 1}
    # everything the agent holds (networks, target, optimizer slots, replay) is in the checkpoint
    restored = DQNAgent.load_checkpoint(str(run / "checkpoint")).get_weights(everything=True)
    live = agent.get_weights(everything=True)
    assert sorted(restored) == sorted(live)
    for key in live:
        np.testing.assert_array_equal(restored[key], live[key], err_msg=key)

    # a config that differs from the saved one is refused
    other = write_config(tmp_path, "other", update={"batch_size": 32})
    assert main(["train", other, "--resume", str(run), "--quiet"]) == 2
    assert "differs from the config saved in" in capsys.readouterr().err

    assert main(["train", "--resume", str(run), "--quiet"]) == 0  # to the saved total, 700
    assert "env steps     700 of 700" in capsys.readouterr().out
    rows, episodes = check_run_files(run, [200, 400, 600, 700])
    after = checkpoint_counts(run)
    assert after == {"agent_steps": 700, "worker_steps": 700, "updates": updates_due(700),
                     "worker_updates": updates_due(700), "replay": 700, "episodes": len(episodes), "resets": 2}
    assert after["episodes"] > before["episodes"]
    assert [int(r["updates"]) for r in rows] == [updates_due(s) for s in (200, 400, 600, 700)]
    assert all(int(e["end_step"]) > 300 for e in episodes[before["episodes"]:])


def test_sigint_mid_step_waits_for_the_step_to_finish(tmp_path):
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers need the main thread")
    run = tmp_path / "run"
    agent = build_agent(write_config(tmp_path))
    act = agent.get_actions

    def get_actions(states, **kwargs):  # Ctrl-C arrives inside step 250 (while acting)
        if agent.timesteps == 250:
            signal.raise_signal(signal.SIGINT)
        return act(states, **kwargs)

    agent.get_actions = get_actions
    with pytest.raises(KeyboardInterrupt):
        Trainer(agent, run).train(700)
    counts = checkpoint_counts(run)
    assert counts["agent_steps"] == counts["worker_steps"] == 251 and counts["replay"] == 251


def test_a_ctrl_c_whose_exception_python_dropped_still_stops_with_a_checkpoint(tmp_path):
    # Python prints and drops an exception raised inside a weakref callback or a __del__; a SIGINT that lands in
    # one while the trainer is between steps (evaluating, writing, plotting) loses its KeyboardInterrupt.
    run = tmp_path / "run"
    agent = build_agent(write_config(tmp_path))
    dropped = []

    def ctrl_c_lost_in_a_weakref_callback(trainer, stats):  # the callback runs between steps
        if trainer.worker.total_steps == 300 and not dropped:
            try:
                trainer._on_sigint(signal.SIGINT, None)
            except KeyboardInterrupt:
                dropped.append(trainer.worker.total_steps)

    trainer = Trainer(agent, run, callback=ctrl_c_lost_in_a_weakref_callback)
    with pytest.raises(KeyboardInterrupt):
        trainer.train(700)
    assert dropped == [300]
    assert trainer.result.stop_reason == "interrupted" and trainer.result.checkpoint == str(run / "checkpoint")
    counts = checkpoint_counts(run)
    assert counts["agent_steps"] == counts["worker_steps"] == counts["replay"] == 301  # the next step boundary (num_envs 1)


def test_second_sigint_aborts_without_a_checkpoint(tmp_path):
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers need the main thread")
    run = tmp_path / "run"
    agent = build_agent(write_config(tmp_path))
    act = agent.get_actions

    def get_actions(states, **kwargs):
        if agent.timesteps == 250:
            signal.raise_signal(signal.SIGINT)
            signal.raise_signal(signal.SIGINT)
        return act(states, **kwargs)

    agent.get_actions = get_actions
    trainer = Trainer(agent, run)
    # What was installed before (a shell that starts CI in the background leaves SIGINT ignored).
    handler = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        trainer.train(700)
    assert agent.timesteps == 250 and trainer.result.checkpoint is None
    assert not os.path.exists(run / "checkpoint")
    check_run_files(run, [200], total=250)  # what was written stays
    assert signal.getsignal(signal.SIGINT) is handler


def test_resume_after_an_abort_drops_what_was_written_after_the_last_checkpoint(tmp_path):
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers need the main thread")
    run = tmp_path / "run"
    agent = build_agent(write_config(tmp_path))
    act = agent.get_actions

    def get_actions(states, **kwargs):  # an abort (two Ctrl-C) inside step 650: no checkpoint then
        if agent.timesteps == 650:
            signal.raise_signal(signal.SIGINT)
            signal.raise_signal(signal.SIGINT)
        return act(states, **kwargs)

    agent.get_actions = get_actions
    with pytest.raises(KeyboardInterrupt):
        Trainer(agent, run, checkpoint_every=400).train(700)
    _, episodes = check_run_files(run, [200, 400, 600], total=650)
    assert checkpoint_counts(run)["worker_steps"] == 400  # the periodic checkpoint
    assert int(episodes[-1]["end_step"]) > 400
    assert main(["train", "--resume", str(run), "--quiet"]) == 0
    _, episodes = check_run_files(run, [200, 400, 600, 700])
    assert checkpoint_counts(run) == {"agent_steps": 700, "worker_steps": 700, "updates": updates_due(700),
                                      "worker_updates": updates_due(700), "replay": 700, "episodes": len(episodes),
                                      "resets": 2}


def test_ctrl_c_of_the_command_exits_130_with_a_checkpoint(tmp_path):
    run = tmp_path / "run"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=os.getcwd())
    proc = subprocess.Popen([sys.executable, "-m", "spacegraph.cli", "train", write_config(tmp_path), "--steps",
                             "100000", "--out", str(run)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if os.path.exists(run / "metrics.jsonl") and read_jsonl(run / "metrics.jsonl"):
                break
            time.sleep(0.1)
        time.sleep(1.0)  # most likely in the middle of stepping by now
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err and f"Continue with: spacegraph train --resume {run}" in err
    assert "stopped       Ctrl-C" in out
    counts = checkpoint_counts(run)
    assert counts["agent_steps"] == counts["worker_steps"] == counts["replay"] >= 200
    with open(run / "checkpoint" / "trainer.json") as fh:
        assert json.load(fh)["total_steps_target"] == 100000


@pytest.mark.parametrize("target, steps, solved", [(1.0, [200], 200), (1e9, [200, 400, 500], None)])
def test_target_return_stops_early(tmp_path, capsys, monkeypatch, target, steps, solved):
    monkeypatch.chdir(tmp_path)
    assert main(["train", write_config(tmp_path), "--steps", "500", "--target-return", str(target), "--quiet"]) == 0
    summary = capsys.readouterr().out
    (run,) = [tmp_path / "runs" / d for d in os.listdir(tmp_path / "runs")]  # the default run directory
    assert run.name.startswith("tiny-torch-")
    check_run_files(run, steps)
    with open(run / "checkpoint" / "trainer.json") as fh:
        assert json.load(fh)["solved_at_step"] == solved
    if solved:
        assert "solved means  mean of 2 greedy episodes >= 1, evaluated every 200 env steps" in summary
        assert "solved at     step 200" in summary
        assert "stopped       solved" in summary
    else:
        assert "solved means  mean of 2 greedy episodes >= 1e+09, evaluated every 200 env steps" in summary
        assert "solved at     not reached" in summary


def test_max_seconds_and_callback_stop_with_a_final_evaluation(tmp_path):
    agent = build_agent(write_config(tmp_path))
    result = Trainer(agent, None, max_seconds=1e-6).train(700)
    assert result.stop_reason == "max_seconds" and result.total_steps == 1 and result.checkpoint is None
    assert [r["env_steps"] for r in result.history] == [1]
    result = Trainer(agent, None, callback=lambda t, s: t.worker.total_steps < 150).train(700)
    assert result.stop_reason == "callback" and [r["env_steps"] for r in result.history] == [150]


@pytest.mark.parametrize("make_args, message", [
    (lambda d: [write_config(d, update={"batch_size": 0}, evaluation={"every": -5})],
     ["tiny.yaml: 2 problem(s) in the agent config", "update.batch_size: Input should be greater than or equal to 1",
      "evaluation.every: Input should be greater than or equal to 1 (got -5)"]),
    (lambda d: [write_config(d, network={"layers": [{"type": "dense", "units": 0}]})],
     ["tiny.yaml", "network:", "units"]),
    (lambda d: ["dqn_no_such_config"], ["dqn_no_such_config: 1 problem(s)", "there are: ", "dqn_cartpole"]),
    (lambda d: [os.path.join(d, "missing.yaml")], ["missing.yaml: 1 problem(s)", "no such file"]),
    (lambda d: ["--resume", str(d / "run")], ["holds no readable training checkpoint (checkpoint/trainer.json)"]),
    (lambda d: [], ["give a CONFIG"]),
    (lambda d: (os.makedirs(d / "run" / "checkpoint"), [write_config(d)])[1],
     ["run already holds a run (a checkpoint or metrics.csv); continue it with Trainer.resume"]),
])
def test_bad_input_gives_a_located_error_and_exit_code_2(tmp_path, capsys, make_args, message):
    assert main(["train", *make_args(tmp_path), "--steps", "10", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("spacegraph train: ") and "Traceback" not in err
    for text in message:
        assert text in err
    assert not os.path.exists(tmp_path / "run" / "metrics.csv")


def test_bad_yaml_names_the_file(tmp_path, capsys):
    path = tmp_path / "broken.yaml"
    path.write_text("agent: dqn\nnetwork: {layers: [\n")
    assert main(["train", str(path)]) == 2
    assert f"{path}: 1 problem(s) in the agent config\n  <top>: not valid YAML" in capsys.readouterr().err


def test_a_resumed_run_keeps_its_seed(tmp_path, capsys):
    assert main(["train", "--resume", str(tmp_path / "run"), "--seed", "3", "--quiet"]) == 2
    assert capsys.readouterr().err == ("spacegraph train: --seed cannot change a resumed run (its seed is in the "
                                       "checkpoint)\n")


@pytest.mark.parametrize("flag", ["--steps", "--eval-episodes", "--threads"])
def test_non_positive_counts_are_refused(tmp_path, capsys, flag):
    with pytest.raises(SystemExit) as info:
        main(["train", write_config(tmp_path), flag, "0"])
    assert info.value.code == 2 and "expected a positive int; got '0'" in capsys.readouterr().err


def test_progress_bar(monkeypatch):
    from reference_agents.training import progress

    clock = FakeClock(start=100.0)
    monkeypatch.setattr(progress, "time", clock)
    stream = TextSink()
    bar = ProgressBar(1000, stream, width=10, min_interval=60.0)
    assert bar.render(250, {"eval": "9.5"}) == "[==>       ] 250/1,000 steps  25%  eval 9.5"
    assert bar.render(1000, {}) == "[==========] 1,000/1,000 steps 100%"
    bar.update(100, {"eps": "0.500"})
    clock.advance(59.0)
    bar.update(200, {"eps": "0.400"})  # within min_interval: not drawn
    assert stream.text == "\r[=>        ] 100/1,000 steps  10%  eps 0.500"
    clock.advance(1.0)
    bar.update(250, {"eps": "0.300"})  # min_interval has passed: drawn
    assert stream.text.endswith("\r[==>       ] 250/1,000 steps  25%  eps 0.300")
    bar.update(300, {}, force=True)  # shorter than the last line: blanks cover its end
    assert stream.text.endswith("\r[===>      ] 300/1,000 steps  30%" + " " * len("  eps 0.300"))
    bar.close()
    assert stream.text.endswith("\n")


def test_without_matplotlib_the_run_goes_on_without_the_curve(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    messages = io.StringIO()
    result = Trainer(build_agent(write_config(tmp_path)), tmp_path / "run", stream=messages,
                     progress=False).train(250)
    assert [r["env_steps"] for r in result.history] == [200, 250]
    assert not os.path.exists(tmp_path / "run" / "learning_curve.png")
    assert messages.getvalue().count("matplotlib is not installed: no learning_curve.png") == 1


def test_each_row_holds_the_means_of_the_updates_since_the_row_before(tmp_path):
    agent = build_agent(TINY, backend="torch")
    seen: list[list[float]] = [[]]
    update = agent.update_on_schedule

    def noting_update_on_schedule():
        out = update()
        seen[-1].extend(m["grad_norm"] for m in out)
        return out

    agent.update_on_schedule = noting_update_on_schedule
    trainer = Trainer(agent, tmp_path / "run", callback=lambda t, stats: None)
    rows = []
    for total in (200, 400):
        trainer.train(total)
        rows.append(trainer.history[-1])
        seen.append([])
    assert [len(s) for s in seen[:2]] == [updates_due(200), updates_due(400) - updates_due(200)]
    for row, norms in zip(rows, seen):
        assert row["grad_norm"] == pytest.approx(np.mean(norms), rel=1e-6) and row["grad_norm"] > 0
        assert row["policy_entropy"] is None and row["policy_lag"] is None   # DQN: no policy entropy, no lag
