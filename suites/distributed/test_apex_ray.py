"""Ape-X on the Ray executor (``-m distributed``): learning CartPole, faults, the same config locally and on Ray,
and no process left behind."""

from __future__ import annotations

import io
import time
from pathlib import Path

import numpy as np
import pytest

from harness.execution.actors import InProcessActorExecutor
from harness.specs.agents import SeedCriterion
from reference_agents.agents.apex import ApexAgent, ApexDriver
from reference_agents.training.apex import ApexTrainer

ROOT = Path(__file__).resolve().parents[2]
APEX_CARTPOLE = ROOT / "reference_agents" / "configs" / "apex_cartpole.yaml"
DQN_CARTPOLE = ROOT / "reference_agents" / "configs" / "dqn_cartpole.yaml"
#: The env-step budget of the learning test. Runs seen solved at 15k-42.5k env steps (seeds 0-2, on Ray and
#: in-process, quiet and loaded machine); one CI run under load stood at a 100-episode greedy mean of 450 at
#: 50k, still rising. The asynchrony of 2 workers, 2 shards and the learner makes each run differ, so the
#: budget leaves room above the slowest run seen; training stops at the first solved evaluation.
LEARNING_STEPS = 100_000
#: The learning criterion: 1 of the seeds 0 and 1, the second run only when the first did not solve. Measured
#: (issue 44, seeds 0-2, Ray, one process at a time on 2 cores): 3 of 3 solved, at 35k, 37.5k and 7.5k env
#: steps in 169, 204 and 36 s; every run recorded before solved too (15k-42.5k, and 65k in a loaded CI run).
#: A run's seed does not fix it on Ray (the asynchrony of workers, shards and learner), so a second seed is
#: a second chance: at a rate of 0.9 a correct agent fails 1 of 2 with probability 1% (one seed: 10%);
#: expected runs 1.0-1.1, at most 2.
LEARNING = SeedCriterion(seeds=(0, 1), required=1)

pytestmark = pytest.mark.distributed


def _check_ledger(driver: ApexDriver) -> dict:
    ledger = driver.ledger()
    assert ledger["in_flight"] == 0, ledger
    assert ledger["produced"] == ledger["held"] + ledger["evicted"] + ledger["lost"], ledger
    if not driver.shard_failures:  # (a dead shard's last count of what it handed out may lag behind)
        assert 0 <= ledger["sampled"] - ledger["learned"] <= (driver.config.apex.prefetch + 3) * \
            driver.config.update.batch_size * driver.num_shards, ledger
    tags = np.concatenate([s.call("held_tags").result(timeout=60) for s in driver.shards])
    assert tags.size == ledger["held"] and np.unique(tags).size == tags.size, "a transition is held twice"
    assert tags.min(initial=0) >= 0 and tags.max(initial=0) < ledger["produced"]
    return ledger


def apex_learning_run(executor, seed: int) -> dict:
    """One Ape-X learning run of apex_cartpole.yaml with ``seed`` (2 workers, 2 shards) on ``executor``."""
    driver = ApexDriver(APEX_CARTPOLE, executor, workers=2, shards=2, seed=seed)
    trainer = ApexTrainer(driver, None, progress=False)
    start = time.perf_counter()
    try:
        result = trainer.train(LEARNING_STEPS)
        ledger = _check_ledger(driver)
    finally:
        trainer.close()
    return {"solved_at": result.solved_at_step, "seconds": time.perf_counter() - start, "ledger": ledger,
            "updates": driver.total_updates,
            "history": [(r["env_steps"], r["screen_return"], r["eval_return"]) for r in result.history]}


def test_apex_learns_cartpole_with_2_workers_and_2_shards(ray_executor, record_property):
    """Greedy mean return >= 475 over 100 episodes (the config's `EvaluationProtocol`) within 100k env steps,
    on `LEARNING`'s seeds (run in order, stopped once the verdict is known)."""
    def run(seed: int) -> dict:
        r = apex_learning_run(ray_executor, seed)
        record_property("learning", f"seed {seed}: solved at {r['solved_at']} env steps in {r['seconds']:.0f} s, "
                                    f"{r['updates']} updates; evaluations: {r['history']}; ledger {r['ledger']}")
        return r

    verdict = LEARNING.run(run, solved=lambda r: r["solved_at"] is not None)
    assert verdict.passed, LEARNING.explain(
        verdict, f"Ape-X (2 workers, 2 shards) to a greedy mean of 475 over 100 episodes within {LEARNING_STEPS} "
                 f"env steps", lambda r: f"evaluations {r['history']}")


def test_the_same_dqn_config_runs_unchanged_locally_and_on_ray(ray_executor):
    """dqn_cartpole.yaml (a plain DQN config) runs as Ape-X in one process and on Ray: same graph, same counts."""
    runs = {}
    for name, executor in (("local", InProcessActorExecutor()), ("ray", ray_executor)):
        driver = ApexDriver(DQN_CARTPOLE, executor, workers=2, shards=2)
        try:
            stats = driver.run(num_steps=1500)
            runs[name] = (driver, stats, _check_ledger(driver))
        finally:
            driver.close()
            if name == "local":
                executor.shutdown()
    reference = ApexAgent(DQN_CARTPOLE)
    for name, (driver, stats, ledger) in runs.items():
        assert stats.steps >= 1500 and ledger["produced"] > 0 and driver.total_updates > 0, (name, ledger)
        weights = driver.agent.get_weights()
        assert {k: v.shape for k, v in weights.items()} == {k: v.shape for k, v in reference.get_weights().items()}
        assert sorted(driver.agent.executor.apis) == sorted(reference.executor.apis)
    # one action per transition produced, both ways: n-step folding leaves at most n-1 open windows per env, and
    # act-time priorities hold back at most one closed window per env (closed in a sample call's last step, it is
    # scored by the next call's first act)
    for name, (driver, stats, ledger) in runs.items():
        open_windows = driver.config.loss.n_step * driver.num_envs
        assert driver.total_steps - open_windows <= ledger["produced"] <= driver.total_steps, (name, ledger)


def test_a_killed_worker_and_a_killed_shard_do_not_stop_the_run(ray_executor):
    """Kill worker-0 and shard-1 mid-run: the run finishes, the shard is reported by name, the counts add up."""
    stream = io.StringIO()
    driver = ApexDriver(APEX_CARTPOLE, ray_executor, workers=2, shards=2, stream=stream)
    killed = {}

    def kill_midway(stats):
        if not killed and driver.total_steps >= 1500:
            killed["updates"] = driver.total_updates
            killed["held"] = driver.ledger()["held"]
            ray_executor.kill(driver.workers[0])
            ray_executor.kill(driver.shards[1])

    try:
        stats = driver.run(num_steps=4000, callback=kill_midway, callback_every=100)
        ledger = _check_ledger(driver)
    finally:
        driver.close()
    assert killed and stats.steps >= 4000
    assert [f["name"] for f in driver.worker_failures] == ["worker-0"], driver.worker_failures
    assert [f["name"] for f in driver.shard_failures] == ["shard-1"], driver.shard_failures
    assert "replay shard 'shard-1' died" in stream.getvalue(), stream.getvalue()
    assert ledger["lost"] == driver.shard_failures[0]["lost"] > 0, ledger
    assert ledger["shards"][1]["deaths"] == 1 and ledger["shards"][1]["held"] > 0, "shard-1 did not come back"
    assert driver.total_updates > killed["updates"], "the learner stopped"
    assert driver.workers[0].incarnation == 1 and driver.shards[1].incarnation == 1


def test_a_worker_whose_environment_raises_is_restarted_on_ray(ray_executor, tmp_path):
    """A worker's environment raises (in the Ray actor's process): the worker is reported by name with the
    error, restarted with the weights, and the run goes on with the ledger balanced."""
    import yaml

    from harness.testing.faulty_envs import CRASH_MESSAGE

    config = yaml.safe_load(APEX_CARTPOLE.read_text())
    config["env"] = {"id": "harness.testing.faulty_envs:CrashingCartPole-v1", "num_envs": 1,
                     "kwargs": {"crash_after": 600, "marker": str(tmp_path / "crashed")}}
    stream = io.StringIO()
    driver = ApexDriver(config, ray_executor, workers=2, shards=2, stream=stream)
    try:
        stats = driver.run(num_steps=2500)
        updates_at_crash = driver.total_updates
        driver.run(num_steps=500)
        _check_ledger(driver)
    finally:
        driver.close()
    assert (tmp_path / "crashed").exists() and stats.steps >= 2500
    failure, = driver.worker_failures
    assert CRASH_MESSAGE in failure["error"] and failure["name"] in ("worker-0", "worker-1"), failure
    restarted = driver.workers[int(failure["name"][-1])]
    assert restarted.incarnation == 1
    assert f"worker {failure['name']!r} failed at env step" in stream.getvalue()
    assert driver.total_updates > updates_at_crash, "the learner stopped after the crash"


def test_a_dead_shard_comes_back_from_its_snapshot_on_ray(ray_executor, tmp_path):
    """shard-0 killed after a snapshot: reported by name, back from its snapshot in the shard actor's new process,
    the ledger balanced (what it held after the snapshot counted lost)."""
    import yaml

    config = yaml.safe_load(APEX_CARTPOLE.read_text())
    config["apex"]["snapshot_every"] = 500
    stream = io.StringIO()
    driver = ApexDriver(config, ray_executor, workers=2, shards=2, snapshot_dir=str(tmp_path), stream=stream)
    try:
        driver.run(num_steps=1500)
        ray_executor.kill(driver.shards[0])
        driver.run(num_steps=1000)
        ledger = _check_ledger(driver)
    finally:
        driver.close()
    failure, = driver.shard_failures
    assert failure["name"] == "shard-0" and failure["restored"] > 0, failure
    assert ledger["lost"] == failure["lost"] >= 0 and ledger["shards"][0]["deaths"] == 1, ledger
    assert "replay shard 'shard-0' died" in stream.getvalue() and "from its snapshot" in stream.getvalue()
    assert driver.shards[0].incarnation == 1 and (tmp_path / "shard-0.npz").exists()


def test_ray_processes_are_gone_after_a_failing_test(tmp_path):
    """The fixture shuts Ray down when the test using it fails: nothing of its session is left."""
    import subprocess
    import sys

    (tmp_path / "conftest.py").write_text((Path(__file__).parent / "conftest.py").read_text())
    (tmp_path / "test_inner.py").write_text(
        "def test_fails(ray_executor):\n"
        "    print('SESSION=' + ray_executor.session_dir, flush=True)\n"
        "    ray_executor.start('x', dict).call('keys').result(timeout=60)\n"
        "    assert False, 'planted failure'\n")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", str(tmp_path)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert "1 failed" in run.stdout and "planted failure" in run.stdout, run.stdout[-3000:] + run.stderr[-2000:]
    session = next(line.split("SESSION=", 1)[1].strip() for line in run.stdout.splitlines() if "SESSION=" in line)
    from harness.execution.ray import ray_session_processes

    assert session and not ray_session_processes(session)


CLUSTER = """
import sys
import ray
from harness.execution.ray import init_local_ray, local_token_path, shutdown_local_ray
init_local_ray(num_cpus=2, include_dashboard=False, object_store_memory=150 * 2 ** 20)
from ray._private.worker import _global_node
print(ray.get_runtime_context().gcs_address, _global_node.get_session_dir_path(), local_token_path(), flush=True)
sys.stdin.readline()
shutdown_local_ray()
"""


def test_spacegraph_train_address_joins_a_running_cluster(tmp_path, capsys, monkeypatch):
    """``--address`` joins a cluster started elsewhere (here a child process, token authentication on) with the
    cluster's token given as Ray reads it (RAY_AUTH_MODE=token, RAY_AUTH_TOKEN_PATH), trains, and leaves it
    running."""
    import os
    import subprocess
    import sys

    from harness.execution.ray import ray_session_processes, wait_session_gone
    from spacegraph.cli import main

    script = tmp_path / "cluster.py"
    script.write_text(CLUSTER)
    cluster = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True)
    session = ""
    try:
        address, session, token_file = cluster.stdout.readline().split()
        monkeypatch.setenv("RAY_AUTH_MODE", "token")
        monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", token_file)
        monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
        out = tmp_path / "run"
        assert main(["train", str(APEX_CARTPOLE), "--executor", "ray", "--address", address, "--steps", "300",
                     "--eval-every", "300", "--screen-episodes", "2", "--out", str(out), "--quiet"]) == 0
        assert "RayActorExecutor: 2 workers" in capsys.readouterr().out
        assert (out / "checkpoint" / "shards" / "shard-0.npz").exists()
        assert ray_session_processes(session), "leaving the run must not stop the cluster it joined"
    finally:
        try:
            cluster.stdin.write("\n")
            cluster.stdin.flush()
        except BrokenPipeError:
            pass   # it ended already
        try:
            cluster.wait(60)
        except subprocess.TimeoutExpired:
            cluster.kill()
    assert not wait_session_gone(session)
