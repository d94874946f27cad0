"""IMPALA's actor-learner loop in one process (actor threads, in-process queues): it learns from the actors'
rollouts, counts each once, and fails on a rollout that was lost or came out of order."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest
import yaml

from harness.execution.transport import (
    InProcessRecordQueue, InProcessWeightStore, OutcomeUnknown, QueueClosed, ThreadActorLearnerExecutor)
from reference_agents.agents import IMPALAAgent
from reference_agents.agents.impala.actor_learner import ActorLearnerWorker, rollout_spec, to_record
from reference_agents.workers import VectorEnvWorker

CONFIG = os.path.join(os.path.dirname(__file__), "..", "..", "reference_agents", "configs", "impala_cartpole.yaml")


def config(**changes):
    with open(CONFIG) as fh:
        cfg = yaml.safe_load(fh)
    cfg.update({"env": {"id": "CartPole-v1", "num_envs": 4}, "rollout": {"length": 8, "batch_size": 2}}, **changes)
    return cfg


@pytest.fixture
def worker():
    agent = IMPALAAgent(config(), backend="torch", seed=1)
    made = ActorLearnerWorker(agent, lambda r, e, w: ThreadActorLearnerExecutor(2, {"rollouts": (r, 8),
                                                                                   "episodes": (e, 10_000)}, w))
    yield made
    made.close()


def test_threads_deliver_rollouts_that_are_learned_once_each(worker):
    before = worker.agent.get_weights()
    stats = worker.run(num_steps=2_000)
    assert stats.num_updates == worker.total_updates > 0 and stats.steps == worker.total_steps >= 2_000
    assert sum(worker.received.values()) * 8 * 4 == worker.total_steps
    assert worker.episodes and all(e.length > 0 for e in worker.episodes)
    version, published = worker.executor.weights.read()
    assert version == worker.total_updates + 1  # the initial publication, then one per update
    for k, v in worker.agent.get_weights().items():
        np.testing.assert_array_equal(published[k], v)
    assert any(not np.array_equal(before[k], v) for k, v in worker.agent.get_weights().items())


class NoActors(ThreadActorLearnerExecutor):
    """The thread executor with no actors: the test puts rollouts into the queue itself."""

    def start_actors(self, body, *args):
        pass


def test_a_lost_rollout_stops_the_learner():
    probe = IMPALAAgent(config(), backend="torch", seed=2)
    VectorEnvWorker.for_agent(probe, update=False).run(num_steps=4 * 8 * 4)
    rollouts = list(probe.outbox)
    agent = IMPALAAgent(config(), backend="torch", seed=1)
    worker = ActorLearnerWorker(agent, lambda r, e, w: NoActors(1, {"rollouts": (r, 8), "episodes": (e, 10)}, w))
    try:
        queue = worker.executor.queues["rollouts"]
        for r in (rollouts[0], rollouts[1], rollouts[3]):  # tag 2 lost on the way
            queue.put(to_record(r, 0, 0))
        queue.put(to_record(rollouts[0], 1, 0))
        with pytest.raises(RuntimeError, match="rollout 3 of actor 0 .* where 2 was due: lost or reordered"):
            worker.run(num_steps=10_000)
        assert worker.received == {0: 2}  # the batch of tags 0 and 1 was learned from
    finally:
        worker.close()


def test_a_learner_without_actors_still_asks_its_callback_and_a_trainer_time_limit_stops_it(tmp_path):
    agent = IMPALAAgent(config(), backend="torch", seed=1)
    worker = ActorLearnerWorker(agent, lambda r, e, w: NoActors(1, {"rollouts": (r, 8), "episodes": (e, 10)}, w))
    calls, result = [], []
    try:
        run = threading.Thread(target=lambda: result.append(worker.run(
            num_steps=10_000, callback=lambda s: calls.append(s.steps) or len(calls) < 2)), daemon=True)
        run.start()
        run.join(60)  # (a bound, not a timing check: without the idle callback the loop never returns)
        assert result, "ActorLearnerWorker.run without rollouts never asked its callback"
        assert calls == [0, 0] and result[0].stopped_by_callback and worker.total_steps == 0
        from reference_agents.training import Trainer

        trainer = Trainer(agent, str(tmp_path / "run"), worker=worker, max_seconds=1.0, eval_episodes=1)
        assert trainer.train(10_000).stop_reason == "max_seconds"
    finally:
        worker.close()


class FaultyTake:
    """A rollout queue whose ``fault_at``-th take raises `OutcomeUnknown`, after taking its records (``ran``) or not."""

    def __init__(self, inner, fault_at, ran):
        self.inner, self.fault_at, self.ran, self.takes = inner, fault_at, ran, 0

    def take(self, count, timeout=None):
        self.takes += 1
        if self.takes == self.fault_at:
            if self.ran:
                self.inner.take(count, timeout)
            raise OutcomeUnknown("a step reached the learner's server twice (planted)")
        return self.inner.take(count, timeout)

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.mark.parametrize("ran", [True, False])
@pytest.mark.parametrize("gap", [0, 3])
def test_a_take_whose_outcome_is_unknown_is_reported_and_counted(ran, gap):
    """A take the transport lost the answer of (seen once in a 2-hour Pong run on distributed TF) does not stop
    the learner: if it ran, its rollouts show as a gap in their actor's tags and are counted lost. Each such
    take excuses at most its own count of missing rollouts (whether it ran or not: the tags cannot tell); a gap
    larger than that still stops the learner (``gap`` more rollouts lost on the way)."""
    import io

    probe = IMPALAAgent(config(), backend="torch", seed=2)
    VectorEnvWorker.for_agent(probe, update=False).run(num_steps=11 * 8 * 4)
    rollouts = list(probe.outbox)
    assert [int(r["tag"]) for r in rollouts] == list(range(11))
    agent = IMPALAAgent(config(), backend="torch", seed=1)
    stream = io.StringIO()
    worker = ActorLearnerWorker(agent, lambda r, e, w: NoActors(1, {"rollouts": (r, 16), "episodes": (e, 10)}, w),
                                stream=stream)
    learned = 6 if ran else 8
    try:
        inner = worker.executor.queues["rollouts"]
        worker.executor.queues["rollouts"] = FaultyTake(inner, fault_at=2, ran=ran)
        for tag in [0, 1, 2, 3] + [4 + gap + i for i in range(4)]:   # the 2nd take (tags 2, 3) has the fault
            inner.put(to_record(rollouts[tag], 0, 0))
        if gap:
            with pytest.raises(RuntimeError, match=f"rollout 7 of actor 0 .* where {2 if ran else 4} was due"):
                worker.run(num_steps=learned * 8 * 4)
            return
        stats = worker.run(num_steps=learned * 8 * 4)
    finally:
        worker.close()
    assert stats.steps == learned * 8 * 4 and worker.received == {0: learned}
    fault, = worker.transport_faults
    assert fault["step"] == "take" and "planted" in fault["error"]
    assert worker.lost_rollouts == (2 if ran else 0)
    out = stream.getvalue()
    assert "learner: take at env step " in out and "the run goes on" in out
    assert ("rollouts 2-3 of actor 0 (incarnation 0) were in a take whose outcome was unknown: 2 lost" in out) == ran
    assert worker.state_dict()["lost_rollouts"] == worker.lost_rollouts


class FaultyPublish:
    """A weight store whose ``fault_at``-th publication raises `OutcomeUnknown` without publishing."""

    def __init__(self, inner, fault_at):
        self.inner, self.fault_at, self.publications = inner, fault_at, 0

    def publish(self, weights):
        self.publications += 1
        if self.publications == self.fault_at:
            raise OutcomeUnknown("a step reached the learner's server twice (planted)")
        return self.inner.publish(weights)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_a_publication_whose_outcome_is_unknown_is_reported_and_the_next_one_goes_out(worker):
    import io

    worker.stream = io.StringIO()
    store = worker.executor.weights = FaultyPublish(worker.executor.weights, fault_at=2)
    worker.run(num_steps=1_000)
    fault, = worker.transport_faults
    assert fault["step"] == "publish" and "learner: publish at env step" in worker.stream.getvalue()
    version, published = store.read()
    assert store.publications == worker.total_updates >= 3 and version == worker.total_updates   # 1 initial, 1 lost
    for k, v in worker.agent.get_weights().items():
        np.testing.assert_array_equal(published[k], v)


def test_in_process_queue_checks_records_and_closes():
    spec = {"x": ("float32", (2,))}
    q = InProcessRecordQueue(spec, 2)
    q.put({"x": [1, 2]})
    with pytest.raises(ValueError, match=r"record\['x'\] has shape \(3,\); the spec says \(2,\)"):
        q.put({"x": [1, 2, 3]})
    with pytest.raises(ValueError, match=r"missing \['x'\], unexpected \['y'\]"):
        q.put({"y": [1, 2]})
    with pytest.raises(TimeoutError):
        q.take(2, timeout=0.1)
    assert q.size() == 1
    q.close()
    with pytest.raises(QueueClosed):
        q.put({"x": [0, 0]})
    assert q.take(1)["x"].tolist() == [[1, 2]]
    with pytest.raises(QueueClosed):
        q.take(1)
    store = InProcessWeightStore()
    assert store.read() == (0, {}) and store.publish({"w": np.ones(2)}) == 1 and store.version() == 1


def test_rollout_spec_matches_the_agents_rollouts():
    agent = IMPALAAgent(config(network={"layers": [{"type": "dense", "units": 8}], "lstm_units": 4}),
                        backend="torch")
    spec = rollout_spec(agent)
    assert spec["rollout_states"] == ("float32", (9, 4, 4)) and spec["initial_h"] == ("float32", (4, 4))
    assert spec["resets"] == ("bool", (9, 4)) and spec["tag"] == ("int64", ())


class RecordsActorBackend(ThreadActorLearnerExecutor):
    """The thread executor, noting the backend its actors were started with."""

    def start_actors(self, body, *args):
        self.actor_args = args
        super().start_actors(body, *args)


@pytest.mark.parametrize("override", [None, "tf"])
def test_a_tensorflow_learner_feeds_actors_on_the_configs_actor_backend(override):
    agent = IMPALAAgent(config(backend="tf", actor_backend="torch"), seed=1)
    worker = ActorLearnerWorker(agent, lambda r, e, w: RecordsActorBackend(
        2, {"rollouts": (r, 8), "episodes": (e, 10_000)}, w), actor_backend=override)
    try:
        before = agent.get_weights()
        worker.run(num_steps=200)
        assert worker.executor.actor_args[1] == (override or "torch") and agent.backend == "tf"
        assert worker.total_updates > 0 and sum(worker.received.values()) * 8 * 4 == worker.total_steps
        assert any(not np.array_equal(before[k], v) for k, v in agent.get_weights().items())
    finally:
        worker.close()


# Rollouts of weights versions 1, 1 | 1, 2 | 99, 1 in batches of 2 (version 1: the publication before any update; 99
# was never published, so its lag is unknown and left out). With publication after every update, version 2 went
# out after update 1: lags 0, 0 | 1, 0 | -, 2. After every second update it had not gone out when batch 2 came
# (its rollout is left out): 0, 0 | 1, - | -, 2.
@pytest.mark.parametrize("publish_every, lags", [(1, [0.0, 0.5, 2.0]), (2, [0.0, 1.0, 2.0])])
def test_the_policy_lag_counts_the_updates_since_the_weights_a_rollout_acted_with(publish_every, lags):
    probe = IMPALAAgent(config(), backend="torch", seed=2)
    VectorEnvWorker.for_agent(probe, update=False).run(num_steps=6 * 8 * 4)
    rollouts = list(probe.outbox)[:6]
    agent = IMPALAAgent(config(), backend="torch", seed=1)
    worker = ActorLearnerWorker(agent, lambda r, e, w: NoActors(1, {"rollouts": (r, 8), "episodes": (e, 10)}, w),
                                publish_every=publish_every)
    try:
        queue = worker.executor.queues["rollouts"]
        for tag, version in enumerate([1, 1, 1, 2, 99, 1]):
            queue.put(to_record(rollouts[tag], 0, 0, version))
        worker.run(num_steps=6 * 8 * 4)
        assert worker.total_updates == 3
        assert worker.update_means.take()["policy_lag"] == pytest.approx(np.mean(lags))
        assert worker.update_means.take() == {}   # taken: the next row starts afresh
    finally:
        worker.close()
