"""IMPALA on distributed TensorFlow and on Ray, with PyTorch and with TensorFlow compute: learning, a killed
actor, every rollout once and in order, nothing left.

The learner's backend is the actors' (`ActorLearnerWorker` hands its agent's backend to the actor body), so
``tf-dist-tf`` runs TensorFlow compute in the learner and in every actor process over the TensorFlow transport,
and ``ray-tf`` the same over Ray; the killed-actor test checks which framework each actor process loaded.
Each test starts its executor: a learner task server and actor processes on free ports of 127.0.0.1 (a
`TFActorLearnerExecutor`), or a local Ray instance on 127.0.0.1 with actor processes (a
`RayActorLearnerExecutor`). The fixture closes them whether the test passes or fails, then checks that no
process is alive (and, for TF, that every port can be bound again).
"""

from __future__ import annotations

import os
import socket
import time

import numpy as np
import pytest
import yaml

from harness.execution.tf_dist import TFActorLearnerExecutor, TFRecordQueue
from harness.execution.transport import QueueClosed
from harness.specs.agents import SeedCriterion
from reference_agents.agents import IMPALAAgent
from reference_agents.training import Trainer
from reference_agents.agents.impala.actor_learner import ActorLearnerWorker

pytestmark = pytest.mark.distributed

CONFIG = os.path.join(os.path.dirname(__file__), "..", "..", "reference_agents", "configs", "impala_cartpole.yaml")


def config(**changes):
    with open(CONFIG) as fh:
        cfg = yaml.safe_load(fh)
    cfg.update(changes)
    return cfg


def port_free(address: str) -> bool:
    host, _, port = address.rpartition(":")
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as a server binds: TIME_WAIT is no owner
        try:
            sock.bind((host, int(port)))
            return True
        except OSError:
            return False


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:  # a zombie is gone for our purposes
        return fh.read().split()[2] != "Z"


def frameworks_loaded(pid: int) -> set[str]:
    """The compute frameworks whose shared libraries process ``pid`` has mapped ("tf", "torch"; none once gone)."""
    try:
        with open(f"/proc/{pid}/maps") as fh:
            libs = {os.path.basename(line.split()[-1]) for line in fh if ".so" in line}
    except OSError:
        return set()
    return {name for name, lib in (("tf", "libtensorflow_framework.so"), ("torch", "libtorch_cpu.so"))
            if any(x.startswith(lib) for x in libs)}


def actor_frameworks(executor) -> list[set[str]]:
    """`frameworks_loaded` of each actor process: tf-dist's actors by their ids; on Ray, whose actors answer no
    call while they run the body, every child of the Ray session's processes (its workers) that loaded a
    framework (the transport host and Ray's own processes load none)."""
    if executor.cluster is not None:
        return [frameworks_loaded(pid) for pid in executor.pids()]
    from harness.execution.ray import ray_session_processes

    session = set(ray_session_processes(executor._ex.session_dir))
    children = [int(pid) for pid in os.listdir("/proc") if pid.isdigit() and parent(int(pid)) in session]
    return [f for f in map(frameworks_loaded, children) if f]


def parent(pid: int) -> int | None:
    """The parent process id of ``pid`` (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rpartition(")")[2].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def make_executor(kind, actors):
    def factory(rollouts, episodes, weights):
        queues = {"rollouts": (rollouts, 8), "episodes": (episodes, 100_000)}
        if kind == "tf-dist":
            return TFActorLearnerExecutor(actors, queues, weights)
        pytest.importorskip("ray")
        from harness.execution.ray.actor_learner import RayActorLearnerExecutor

        return RayActorLearnerExecutor(actors, queues, weights, num_cpus=2)
    return factory


#: (executor, compute backend) of the learner and its actors.
EXECUTOR_BACKENDS = [("tf-dist", "torch"), ("tf-dist", "tf"), ("ray", "torch"), ("ray", "tf")]


@pytest.fixture(params=EXECUTOR_BACKENDS, ids=[f"{kind}-{backend}" for kind, backend in EXECUTOR_BACKENDS])
def learner(request):
    """``make(config, actors, seed=0) -> ActorLearnerWorker`` on the executor with the backend's compute;
    ``make.finish(worker)`` closes one and checks that nothing of it is left; whatever the test did not finish
    is finished after it."""
    made = []
    kind, backend = request.param

    def make(cfg, actors=2, seed=0, **kwargs):
        agent = IMPALAAgent(cfg, backend=backend, seed=seed)
        assert agent.backend == backend
        worker = ActorLearnerWorker(agent, make_executor(kind, actors), **kwargs)
        made.append(worker)
        return worker

    def finish(worker):
        made.remove(worker)
        ex = worker.executor
        if kind == "tf-dist":
            pids = [p for p in ex.pids() if p is not None] + [ex._server.pid]
        else:
            from harness.execution.ray import ray_session_processes

            session = ex._ex.session_dir
        worker.close()
        deadline = time.monotonic() + 20
        if kind == "tf-dist":
            while any(alive(p) for p in pids) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert not [p for p in pids if alive(p)], "actor or server processes outlived the executor"
            for address in ex.cluster["learner"] + ex.cluster["actor"]:
                assert port_free(address), f"port {address} still taken after shutdown"
        else:
            left = ray_session_processes(session)
            while left and time.monotonic() < deadline:
                time.sleep(0.25)
                left = ray_session_processes(session)
            assert not left, f"Ray processes outlived the executor: {left}"

    make.finish = finish
    yield make
    for worker in list(made):
        finish(worker)


#: The learning criterion: the config's definition of solved within 400k env steps (2 actor processes) on 1 of
#: the seeds 0 and 1, the second run only when the first did not solve. Measured (issue 44, seeds 0-2 each, PyTorch
#: compute):
#: distributed TF 3 of 3 solved at 110k-240k env steps in 26-51 s, Ray 3 of 3 at 50k-280k in 12-37 s; with TF
#: compute (issue 43, seeds 0-2 each, at a load of 5-8 on the 2 cores) distributed TF 3 of 3 at 130k-340k in
#: 41-71 s, Ray 3 of 3 at 140k-400k in 28-59 s (seed 1 at the last evaluation). The actors'
#: timing makes each run differ, so a second seed is a second chance: at a rate of 0.9 a correct agent fails
#: 1 of 2 with probability 1% (one seed: 10%); expected runs 1.0-1.1, at most 2. ``max_seconds`` (170) bounds
#: a hung run.
LEARNING = SeedCriterion(seeds=(0, 1), required=1)
LEARNING_STEPS = 400_000


def test_impala_learns_cartpole(learner, record_property):
    def run(seed: int) -> dict:
        worker = learner(config(), actors=2, seed=seed)
        start = time.perf_counter()
        try:
            result = Trainer(worker.agent, worker=worker, progress=False, max_seconds=170).train(LEARNING_STEPS)
            record_property("learning", f"seed {seed}: solved at {result.solved_at_step} env steps in "
                                        f"{time.perf_counter() - start:.0f} s (2 actor processes); rollouts per "
                                        f"actor {dict(worker.received)}")
            assert sum(worker.received.values()) * 20 * 16 == worker.total_steps
        finally:
            learner.finish(worker)
        return result

    verdict = LEARNING.run(run, solved=lambda r: r.solved_at_step is not None)
    assert verdict.passed, LEARNING.explain(
        verdict, f"IMPALA (2 actor processes) within {LEARNING_STEPS} env steps",
        lambda r: f"stopped by {r.stop_reason}; evaluations {[(h['env_steps'], h['screen_return']) for h in r.history]}")


def test_a_killed_actor_is_restarted_and_rollouts_arrive_once_in_order(learner, capsys):
    worker = learner(config(rollout={"length": 10, "batch_size": 2}), actors=2)
    for _ in range(40):  # until both actors (started one after the other on 2 cores) have delivered
        worker.run(num_steps=1_600)
        if set(worker.received) == {0, 1}:
            break
    first = dict(worker.received)
    assert set(first) == {0, 1}
    # the actors computed with the learner's backend: TF actors never load PyTorch (a TF transport loads TF in
    # every tf-dist actor, so the TF libraries tell only on Ray)
    backend, loaded = worker.agent.backend, actor_frameworks(worker.executor)
    assert len(loaded) == 2, loaded
    assert all(backend in f and (backend == "torch" or "torch" not in f) for f in loaded), loaded
    worker.executor.kill(0)
    deadline = time.monotonic() + 90
    while worker._next_tag.get((0, 1), 0) < 2 and time.monotonic() < deadline:  # the new actor 0 starts (~10 s)
        worker.run(num_steps=1_600)
    reports = worker.executor.failures
    assert [(r.index, r.incarnation, r.restarted) for r in reports] == [(0, 0, True)], reports
    assert "actor 0 (incarnation 0" in capsys.readouterr().err
    # the restarted actor's rollouts arrived: tags of incarnation 1 were checked from 0 on
    assert worker._next_tag.get((0, 1), 0) >= 2 and worker.received[0] > first[0]
    # every rollout learned from counted once: env steps are exactly those of the rollouts
    assert sum(worker.received.values()) * 10 * 16 == worker.total_steps


def test_transport_queue_and_weights_over_grpc():
    spec = {"x": ("float32", (2,)), "tag": ("int64", ())}
    with TFActorLearnerExecutor(1, {"q": (spec, 4)}, {"w": ("float32", (3,))}) as ex:
        assert ex.weights.read()[0] == 0
        assert ex.weights.publish({"w": np.arange(3, dtype=np.float32)}) == 1
        assert ex.weights.publish({"w": np.ones(3, np.float32)}) == 2
        version, weights = ex.weights.read()
        assert version == 2 and weights["w"].tolist() == [1, 1, 1]
        queue: TFRecordQueue = ex.queues["q"]
        for tag in range(3):
            queue.put({"x": [tag, tag], "tag": tag})
        with pytest.raises(ValueError, match=r"record\['x'\] has shape \(3,\)"):
            queue.put({"x": [1, 2, 3], "tag": 0})
        got = queue.take(2, timeout=5)
        assert got["tag"].tolist() == [0, 1] and got["x"].shape == (2, 2)
        with pytest.raises(TimeoutError):
            queue.take(2, timeout=0.5)
        assert queue.size() == 1  # a timed-out take leaves the queue as it was
        queue.close()
        with pytest.raises(QueueClosed):
            queue.put({"x": [0, 0], "tag": 9})
