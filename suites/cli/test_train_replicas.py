"""``spacegraph train --replicas N [--replica-mode M]``: the strategy the flags write into a run's config, the
flags refused by name, and a towers run that records its strategy (processes mode: suites/distributed/
test_train_replicas.py and test_replica_failure.py)."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from reference_agents.training.replicas import replica_strategy, with_replicas
from spacegraph.cli import main

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def write_dqn_config(folder, **changes) -> str:
    """A small DQN CartPole config: 32 units, learning after 200 steps, an evaluation of 2 episodes."""
    with open(os.path.join(ROOT, "reference_agents", "configs", "dqn_cartpole.yaml")) as fh:
        cfg = yaml.safe_load(fh)
    cfg.update({"network": {"layers": [{"type": "dense", "units": 32, "activation": "relu"}], "dueling": True},
                "update": {"batch_size": 32, "start_after": 200, "every": 1, "repeats": 1},
                "evaluation": {"every": 500, "screen_episodes": 1, "episodes": 2, "target_return": 1e9}}, **changes)
    path = os.path.join(folder, "dqn_tiny.yaml")
    with open(path, "w") as fh:
        yaml.safe_dump(cfg, fh)
    return path


@pytest.mark.parametrize("execution, replicas, mode, expected", [
    ({}, 1, None, "local"),
    ({}, 1, "towers", "local"),
    ({}, 2, None, {"type": "sync-replicas", "replicas": 2, "mode": "processes"}),
    ({"strategy": "local"}, 3, "towers", {"type": "sync-replicas", "replicas": 3, "mode": "towers"}),
    # the older form is towers on execution.devices: the mode stays, the devices when one per replica
    ({"strategy": "sync-replicas", "devices": ["cpu", "cpu"]}, 2, None,
     {"type": "sync-replicas", "replicas": 2, "mode": "towers", "devices": ["cpu", "cpu"]}),
    ({"strategy": "sync-replicas", "devices": ["cpu", "cpu"]}, 3, None,
     {"type": "sync-replicas", "replicas": 3, "mode": "towers"}),
    ({"strategy": "sync-replicas", "devices": ["cpu", "cpu"]}, 2, "processes",
     {"type": "sync-replicas", "replicas": 2, "mode": "processes"}),
    # the mapping form: its mode and all-reduce backend stay (the backend only for processes)
    ({"strategy": {"type": "sync-replicas", "replicas": 4, "mode": "processes", "backend": "gloo"}}, 2, None,
     {"type": "sync-replicas", "replicas": 2, "mode": "processes", "backend": "gloo"}),
    ({"strategy": {"type": "sync-replicas", "replicas": 2, "mode": "processes", "backend": "gloo"}}, 2, "towers",
     {"type": "sync-replicas", "replicas": 2, "mode": "towers"}),
    ({"strategy": {"type": "sync-replicas", "replicas": 2, "mode": "towers", "devices": ["cpu", "cpu"]}}, 2, None,
     {"type": "sync-replicas", "replicas": 2, "mode": "towers", "devices": ["cpu", "cpu"]}),
])
def test_replicas_flag_sets_the_strategy(execution, replicas, mode, expected):
    assert replica_strategy(execution, replicas, mode) == expected
    config = {"agent": "dqn", "execution": dict(execution, trace=["act"])}
    rewritten = with_replicas(config, replicas, mode)
    assert rewritten["execution"] == {"trace": ["act"], "strategy": expected}  # (the older devices key gone)
    assert config["execution"] == dict(execution, trace=["act"])  # the caller's dict untouched


@pytest.mark.parametrize("replicas, mode, message", [
    (0, None, "--replicas: expected a positive number of replicas; got 0"),
    (True, None, "--replicas: expected a positive number of replicas; got True"),
    (2, "threads", "--replica-mode: expected one of processes, towers; got 'threads'"),
])
def test_bad_replica_values_are_named(replicas, mode, message):
    with pytest.raises(ValueError) as info:
        replica_strategy({}, replicas, mode)
    assert str(info.value) == message


@pytest.mark.parametrize("flags, message", [
    (["--replica-mode", "towers"], "--replica-mode towers needs --replicas N"),
    (["--replicas", "0"], "argument --replicas: expected a positive int; got '0'"),
    (["--replicas", "2", "--replica-mode", "threads"], "--replica-mode: invalid choice: 'threads'"),
])
def test_bad_replica_flags_are_refused_by_name(tmp_path, capsys, flags, message):
    config = write_dqn_config(str(tmp_path))
    try:
        rc = main(["train", config, "--steps", "100", "--out", str(tmp_path / "run"), "--quiet", *flags])
    except SystemExit as exc:  # argparse's own refusals
        rc = exc.code
    assert rc == 2
    assert message in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "run")


def test_replicas_are_refused_for_a_users_agent(tmp_path, capsys, monkeypatch):
    (tmp_path / "replicas_user_agents.py").write_text(
        "from reference_agents.agents.dqn import DQNAgent\n\n\nclass MyAgent(DQNAgent):\n"
        "    checkpoint_format = 'my-agent-checkpoint'\n")
    config = write_dqn_config(str(tmp_path), agent="replicas_user_agents:MyAgent")
    monkeypatch.chdir(tmp_path)
    assert main(["train", config, "--steps", "100", "--out", str(tmp_path / "run"), "--replicas", "2"]) == 2
    assert ("--replicas is for the built-in agents' updates (dqn, impala, apex); agent "
            "'replicas_user_agents:MyAgent' chooses its own execution") in capsys.readouterr().err


def test_resume_with_a_replica_mode_alone_is_refused(tmp_path, capsys):
    config, run = write_dqn_config(str(tmp_path)), str(tmp_path / "run")
    assert main(["train", config, "--steps", "300", "--out", run, "--quiet", "--no-tensorboard"]) == 0
    capsys.readouterr()
    assert main(["train", "--resume", run, "--replica-mode", "processes", "--quiet"]) == 2
    assert "--replica-mode processes needs --replicas N" in capsys.readouterr().err
    with open(os.path.join(run, "metrics.jsonl")) as fh:
        assert [json.loads(line)["env_steps"] for line in fh] == [300]  # the run untouched


def test_a_towers_run_records_its_strategy_and_resumes_with_its_towers_only(tmp_path, capsys):
    config, run = write_dqn_config(str(tmp_path)), str(tmp_path / "run")
    common = ["--quiet", "--no-tensorboard"]
    assert main(["train", config, "--steps", "500", "--out", run, "--replicas", "2", "--replica-mode", "towers",
                 *common]) == 0
    assert "update on     2 replicas (towers) on cpu, cpu" in capsys.readouterr().out
    with open(os.path.join(run, "checkpoint", "trainer.json")) as fh:
        record = json.load(fh)["strategy"]
    assert (record["type"], record["mode"], record["replicas"]) == ("sync-replicas", "towers", 2)
    # without --replicas the run keeps its towers; with another count it is refused before any load
    assert main(["train", "--resume", run, "--steps", "1000", *common]) == 0
    assert "update on     2 replicas (towers) on cpu, cpu" in capsys.readouterr().out
    # the config file given again with the same flags is the saved config
    assert main(["train", config, "--resume", run, "--steps", "1500", "--replicas", "2", "--replica-mode", "towers",
                 *common]) == 0
    assert "update on     2 replicas (towers) on cpu, cpu" in capsys.readouterr().out
    assert main(["train", "--resume", run, "--steps", "2000", "--replicas", "1", *common]) == 2
    assert (f"--replicas 1: the run in {run} ran 2 towers (mode towers), and its checkpoint holds each tower's "
            f"variables: resume it with --replicas 2 --replica-mode towers, or without --replicas"
            in capsys.readouterr().err)


def test_a_local_run_cannot_resume_as_towers(tmp_path, capsys):
    config, run = write_dqn_config(str(tmp_path)), str(tmp_path / "run")
    assert main(["train", config, "--steps", "300", "--out", run, "--quiet", "--no-tensorboard"]) == 0
    assert "update on     local (one replica)" in capsys.readouterr().out
    assert main(["train", "--resume", run, "--steps", "600", "--replicas", "3", "--replica-mode", "towers"]) == 2
    assert (f"--replicas 3 --replica-mode towers: the run in {run} ran local (one replica); its checkpoint has no "
            f"tower variables, so it cannot resume as 3 towers" in capsys.readouterr().err)
