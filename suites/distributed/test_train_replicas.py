"""``spacegraph train --replicas 2`` in processes mode: DQN and IMPALA CartPole on each backend, the Ape-X learner
(local executor) and the IMPALA learner with distributed TF or Ray actors run a few thousand steps with one
replica process beside the trainer's, record their strategy, and leave no process behind (the resume of a
failed run: test_replica_failure.py)."""

from __future__ import annotations

import os

import psutil
import pytest

from spacegraph.cli import main
from suites.distributed.replica_runs import is_replica, left_running, rows, trainer_state, write_config

pytestmark = pytest.mark.distributed


def run_cli(argv: list[str]) -> tuple[int, list[psutil.Process], set[int]]:
    """``main(argv)``, the replica processes it started that are still running once it returned, and the
    parents of the replicas; the replicas are seen while the run goes (psutil, at every `Trainer` evaluation)."""
    from reference_agents.training import Trainer

    seen: dict[int, psutil.Process] = {}
    parents: set[int] = set()
    evaluate = Trainer._evaluate

    def watching(self, *args, **kwargs):
        for p in psutil.Process().children(recursive=True):
            if is_replica(p):
                seen[p.pid] = p
                parents.add(p.ppid())
        return evaluate(self, *args, **kwargs)

    Trainer._evaluate = watching
    try:
        rc = main(argv)
    finally:
        Trainer._evaluate = evaluate
    assert seen, "no replica process was running during the run"
    return rc, left_running(list(seen.values())), parents


def processes_record(run: str) -> dict:
    strategy = trainer_state(run)["strategy"]
    assert strategy["type"] == "sync-replicas" and strategy["mode"] == "processes"
    assert strategy["replicas"] == 2 and strategy["backend"] == "gloo"
    return strategy


@pytest.mark.parametrize("agent, backend", [("dqn_cartpole", "torch"), ("dqn_cartpole", "tf"),
                                            ("impala_cartpole", "torch"), ("impala_cartpole", "tf")])
def test_two_replica_processes_train_and_record_their_strategy(tmp_path, capsys, agent, backend):
    config, run = write_config(str(tmp_path), agent), str(tmp_path / "run")
    rc, left, _ = run_cli(["train", config, "--backend", backend, "--steps", "2000", "--out", run, "--quiet",
                           "--no-tensorboard", "--replicas", "2"])
    assert rc == 0 and not left, left
    out = capsys.readouterr().out
    assert "update on     2 replicas (processes, gloo) on cpu, cpu" in out
    processes_record(run)
    assert rows(run)[-1]["env_steps"] == 2000 and rows(run)[-1]["updates"] > 0
    if (agent, backend) == ("dqn_cartpole", "torch"):  # a processes checkpoint holds one copy: any count resumes it
        assert main(["train", "--resume", run, "--steps", "2500", "--quiet", "--no-tensorboard", "--replicas",
                     "1"]) == 0
        assert "update on     local (one replica)" in capsys.readouterr().out
        assert trainer_state(run)["strategy"]["replicas"] == 1 and rows(run)[-1]["env_steps"] == 2500


def test_apex_learner_on_two_replica_processes(tmp_path, capsys):
    config, run = write_config(str(tmp_path), "apex_cartpole"), str(tmp_path / "run")
    rc, left, _ = run_cli(["train", config, "--executor", "local", "--steps", "1500", "--out", run, "--quiet",
                           "--no-tensorboard", "--replicas", "2"])
    assert rc == 0 and not left, left
    assert "update on     2 replicas (processes, gloo)" in capsys.readouterr().out
    processes_record(run)
    assert rows(run)[-1]["updates"] > 0  # the learner's updates, each on the two replicas


@pytest.mark.parametrize("executor, count", [("tf-dist", "--actors"), ("ray", "--workers")])
def test_impala_learner_on_two_replica_processes_with_distributed_actors(tmp_path, capsys, executor, count):
    config, run = write_config(str(tmp_path), "impala_cartpole"), str(tmp_path / "run")
    rc, left, parents = run_cli(["train", config, "--backend", "torch", "--executor", executor, count, "2",
                                 "--steps", "1600", "--out", run, "--quiet", "--no-tensorboard", "--replicas", "2",
                                 "--max-seconds", "150"])  # (actors that cannot act would stall it)
    assert rc == 0 and not left, left
    assert rows(run)[-1]["env_steps"] >= 1600
    out = capsys.readouterr().out
    assert "update on     2 replicas (processes, gloo)" in out and "failures: none" in out
    processes_record(run)
    # the actors act with a local strategy: every replica process is the learner's (an actor that kept the
    # strategy would have started a replica of its own)
    assert parents == {os.getpid()}
