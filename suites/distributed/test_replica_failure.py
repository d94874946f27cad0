"""A replica process that dies stops ``spacegraph train --replicas 2`` with one error naming it (exit 1), the last
checkpoint stays loadable and ``--resume`` finishes the run on the replicas again; Ctrl-C (SIGINT to the
command) and a resume that fails end the replica processes too. CartPole DQN,
the command in a subprocess of its own (its replicas found with psutil)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from spacegraph.cli import main
from suites.distributed.replica_runs import (QUIET_ENV, is_replica, left_running, replicas_of, rows,
                                             trainer_state, write_config)

pytestmark = pytest.mark.distributed


def start_cli(args: list[str]) -> subprocess.Popen:
    """``spacegraph train ARGS`` in a new session (its own process group), stderr captured."""
    return subprocess.Popen([sys.executable, "-m", "spacegraph.cli", "train", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **QUIET_ENV},
                            start_new_session=True)


def wait_for(what, cli: subprocess.Popen, timeout_s: float = 240.0):
    """``what()`` once it is truthy, polling while the command runs."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = what()
        if value:
            return value
        if cli.poll() is not None:
            out, err = cli.communicate()
            pytest.fail(f"the command ended (status {cli.returncode}) before it was time:\n{out[-2000:]}{err[-3000:]}")
        time.sleep(0.2)
    cli.kill()
    pytest.fail("timed out waiting")


def checkpointed_run(tmp_path, backend: str) -> tuple[str, subprocess.Popen, list[psutil.Process]]:
    """A long --replicas 2 run, started and past its first checkpoint: (run directory, command, replicas)."""
    config, run = write_config(str(tmp_path), "dqn_cartpole"), str(tmp_path / "run")
    cli = start_cli([config, "--backend", backend, "--steps", "200000", "--checkpoint-every", "500", "--out", run,
                     "--quiet", "--no-tensorboard", "--replicas", "2"])
    wait_for(lambda: os.path.exists(os.path.join(run, "checkpoint", "trainer.json")), cli)
    replicas = wait_for(lambda: replicas_of(cli.pid), cli)
    return run, cli, replicas


def test_a_killed_replica_stops_the_run_and_resume_finishes_it(tmp_path):
    run, cli, replicas = checkpointed_run(tmp_path, "torch")
    assert len(replicas) == 1
    victim = replicas[0]
    victim.kill()
    out, err = cli.communicate(timeout=120)
    assert cli.returncode == 1, err[-3000:]
    assert "Traceback" not in err
    assert f"replica 1 of 2 (pid {victim.pid}, signal SIGKILL)" in err
    assert f"the last checkpoint, {os.path.join(run, 'checkpoint')}, is kept" in err
    assert f"spacegraph train --resume {run}" in err
    assert not left_running(replicas_of(cli.pid))
    saved = trainer_state(run)
    assert saved["strategy"]["replicas"] == 2
    steps = saved["history"][-1]["env_steps"]  # the last checkpoint's
    # the checkpoint loads and the run goes on from it, on two replica processes again
    resumed = start_cli(["--resume", run, "--steps", str(steps + 500), "--quiet", "--no-tensorboard"])
    again = wait_for(lambda: replicas_of(resumed.pid), resumed)
    out, err = resumed.communicate(timeout=240)
    assert resumed.returncode == 0, err[-3000:]
    assert "update on     2 replicas (processes, gloo)" in out
    assert [r["env_steps"] for r in rows(run)][-2:] == [steps, steps + 500]
    assert trainer_state(run)["strategy"]["replicas"] == 2
    assert not left_running(again)


def test_ctrl_c_checkpoints_and_ends_the_replicas(tmp_path):
    run, cli, replicas = checkpointed_run(tmp_path, "torch")
    os.killpg(cli.pid, signal.SIGINT)  # as a terminal's Ctrl-C: to the command's whole process group, replicas too
    out, err = cli.communicate(timeout=120)
    assert cli.returncode == 130, err[-3000:]
    assert f"Continue with: spacegraph train --resume {run}" in err
    assert not left_running(replicas)
    assert trainer_state(run)["agent_timesteps"] > 500  # the checkpoint Ctrl-C wrote, past the first one


def test_a_failed_resume_ends_the_replicas_it_started(tmp_path, capsys):
    config, run = write_config(str(tmp_path), "dqn_cartpole"), str(tmp_path / "run")
    assert main(["train", config, "--backend", "torch", "--steps", "600", "--out", run, "--quiet",
                 "--no-tensorboard"]) == 0
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    os.remove(os.path.join(run, "checkpoint", "agent_replay.npz"))  # the agent builds (replicas start), then fails
    assert main(["train", "--resume", run, "--steps", "1200", "--quiet", "--replicas", "2"]) == 2
    assert "agent_replay.npz" in capsys.readouterr().err
    started = [p for p in psutil.Process().children(recursive=True) if p.pid not in before and is_replica(p)]
    assert not left_running(started, wait_s=0.0)
