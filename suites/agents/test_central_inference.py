"""Central batched inference (SEED RL style) in one process (actor threads): the learner's actions are its
policy's, every request is answered once and in order, recurrent state stays with its environment, an
actor that stops never holds the others back, and the batching itself on a fake clock: a batch closes when
full or when the window after its first request has passed on the clock, never later (no wall-time asserts)."""

from __future__ import annotations

import collections
import os
import time

import numpy as np
import pytest
import yaml

from harness.execution.transport import ThreadActorLearnerExecutor
from harness.specs.agents import SeedCriterion
from reference_agents.agents import IMPALAAgent
from reference_agents.training import Trainer
from reference_agents.agents.impala.central_inference import CentralInferenceWorker, env_actor, gather_requests
from suites.doubles import FakeClock

CONFIG = os.path.join(os.path.dirname(__file__), "..", "..", "reference_agents", "configs", "impala_cartpole.yaml")


def config(lstm=None, **changes):
    with open(CONFIG) as fh:
        cfg = yaml.safe_load(fh)
    cfg.update({"env": {"id": "CartPole-v1", "num_envs": 3}, "rollout": {"length": 8, "batch_size": 2},
                "network": {"layers": [{"type": "dense", "units": 16, "activation": "tanh"}], "lstm_units": lstm}},
               **changes)
    return cfg


def make(lstm=None, actors=3, executor=ThreadActorLearnerExecutor, **kwargs):
    agent = IMPALAAgent(config(lstm), backend="torch", seed=4)
    return CentralInferenceWorker(agent, lambda q: executor(actors, q, {}), actors, **kwargs)


def wait_for(predicate, seconds=30.0):
    end = time.monotonic() + seconds
    while not predicate() and time.monotonic() < end:
        time.sleep(0.02)
    assert predicate()


@pytest.mark.parametrize("lstm", [None, 5], ids=["ff", "lstm"])
def test_rollouts_carry_the_policys_logits_and_recurrent_state_across_episode_ends(lstm):
    worker = make(lstm, max_waiting=9)
    try:
        worker.start()  # inference only: nothing learns, so the weights stay those that acted
        wait_for(lambda: len(worker._rollouts) >= 9)
        rollouts = list(worker._rollouts)[:9]
    finally:
        worker.close()
    assert any((r["discounts"] == 0).any() for r in rollouts), "no episode ended inside a rollout"
    for r in rollouts:
        logits, _ = worker.agent.rollout_logits(r)
        np.testing.assert_allclose(logits[:-1], r["behaviour_logits"], rtol=1e-4, atol=1e-5)
    assert sum(worker.batch_sizes.values()) > 0 and max(worker.batch_sizes) <= 3


def test_every_request_is_answered_once_in_order_and_a_duplicate_is_caught():
    worker = make(max_waiting=1000)  # nothing learns: the rollouts pile up
    try:
        worker.start()
        wait_for(lambda: min(worker.answered.values(), default=0) >= 20)
        assert set(worker.answered) == {0, 1, 2}
        slot = worker._slots[1]
        request = {"actor": np.array([1]), "incarnation": np.array([slot.incarnation]),
                   "seq": np.array([slot.next_seq - 1]), "first": np.array([False]),
                   "obs": np.zeros((1, 3, 4), np.float32), "final": np.zeros((1, 3, 4), np.float32),
                   "reward": np.zeros((1, 3), np.float32), "terminated": np.zeros((1, 3), bool),
                   "truncated": np.zeros((1, 3), bool)}
        with pytest.raises(RuntimeError, match="request .* of actor 1 where .* was due: a step was dropped or sent "
                                               "twice"):
            worker._answer(request)  # the last request again, as a transport that delivers twice would
    finally:
        worker.close()


def stalled_actor(transport, index, incarnation, env, seed):
    """Actor 0 leaves without a request (as one whose connection is gone); the others act normally."""
    if index != 0:
        env_actor(transport, index, incarnation, env, seed)


class StallingExecutor(ThreadActorLearnerExecutor):
    def start_actors(self, body, *args):
        super().start_actors(stalled_actor, *args)


def test_an_actor_that_sends_nothing_never_holds_the_batch_back():
    """Batches of 3 wait for an actor that never sends: the others are answered all the same, in batches
    without it (how long a batch waits is checked on a fake clock below, not on this machine's)."""
    worker = make(actors=3, executor=StallingExecutor, timeout_ms=5.0, max_waiting=1000)
    try:
        worker.start()
        wait_for(lambda: min(worker.answered.get(1, 0), worker.answered.get(2, 0)) >= 50)
        assert 0 not in worker.answered
        assert max(worker.batch_sizes) <= 2 and worker.max_wait > 0, worker.batch_sizes
    finally:
        worker.close()


class ScriptedRequests:
    """A request queue whose requests arrive at set times of a `FakeClock` (``arrivals``: one time per request,
    sorted); a blocking take of the first waits on the clock up to its timeout."""

    def __init__(self, clock: FakeClock, arrivals: list[float]) -> None:
        self.clock, self.arrivals, self.taken = clock, list(arrivals), 0

    def size(self) -> int:
        return sum(t <= self.clock.now for t in self.arrivals[self.taken:])

    def take(self, count, timeout=None):
        if not self.size():
            pending = self.arrivals[self.taken:]
            if not pending or (timeout is not None and pending[0] > self.clock.now + timeout):
                self.clock.advance(timeout or 0.0)
                raise TimeoutError("no request")
            self.clock.now = pending[0]
        assert count <= self.size(), "took more than was waiting"
        seq = np.arange(self.taken, self.taken + count)
        self.taken += count
        return {"seq": seq}


POLL = 0.0002  # gather_requests' default wait between looks at an empty queue


def gather_all(arrivals, max_batch=3, timeout=0.005):
    """Batches the scripted requests until none is left: ``[(requests in the batch, fake seconds waited)]``."""
    clock = FakeClock()
    requests = ScriptedRequests(clock, arrivals)
    batches = []
    while (got := gather_requests(requests, max_batch, timeout, clock=clock, sleep=clock.sleep)) is not None:
        batch, waited = got
        batches.append((batch["seq"].tolist(), waited))
    return batches


def test_a_batch_missing_an_actor_closes_at_the_window_after_its_first_request():
    """Actor 0 never sends (2 of 3 requests per step): each batch waits out the 5 ms window on the clock, no
    longer than one poll past it, and takes the two that came."""
    arrivals = [t + d for t in (0.0, 0.1, 0.2) for d in (0.0, 0.001)]
    batches = gather_all(arrivals)
    assert [seqs for seqs, _ in batches] == [[0, 1], [2, 3], [4, 5]]
    for _, waited in batches:
        assert 0.005 <= waited <= 0.005 + POLL + 1e-12, batches


def test_a_full_batch_goes_at_once_and_a_late_request_goes_to_the_next():
    # 3 requests within 2 ms: full, sent when the third comes; then one at 7 ms after the first of its batch
    # (outside the window of 5) starts a batch of its own
    batches = gather_all([0.0, 0.001, 0.002, 0.1, 0.107, 0.108, 0.109])
    assert [seqs for seqs, _ in batches] == [[0, 1, 2], [3], [4, 5, 6]]
    assert abs(batches[0][1] - 0.002) < POLL + 1e-12 and abs(batches[2][1] - 0.002) < POLL + 1e-12
    assert 0.005 <= batches[1][1] <= 0.005 + POLL + 1e-12


def test_a_batch_takes_at_most_max_batch_of_the_waiting_requests():
    batches = gather_all([0.0] * 7, max_batch=3)
    assert [seqs for seqs, _ in batches] == [[0, 1, 2], [3, 4, 5], [6]]
    assert [waited for _, waited in batches[:2]] == [0.0, 0.0] and batches[2][1] >= 0.005


# ---- inference and learning overlap ------------------------------------------------------------------------
def answered_twice_more(worker, before, seconds=30.0):
    """Waits (polling, at most ``seconds``) until every actor had two more requests answered than ``before``
    (answers per actor); whether they were."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if all(worker.answered[i] >= n + 2 for i, n in before.items()):
            return True
        time.sleep(0.005)
    return False


@pytest.mark.parametrize("backend", ["torch", "tf"])
def test_requests_are_served_during_an_update_each_with_one_whole_published_version(backend):
    """An update that writes half the learner's weights and then blocks until every actor was answered twice:
    the answers come (inference does not wait for learning), each step records the version it acted with (the
    one published after the update before), and its behaviour logits are exactly that version's (a read of the
    half-written weights would match none); the policy lag of every rollout learned is counted."""
    updates, actors = 3, 3
    agent = IMPALAAgent(config(), backend=backend, seed=4)
    worker = CentralInferenceWorker(agent, lambda q: ThreadActorLearnerExecutor(actors, q, {}), actors,
                                    max_waiting=1000)  # the update's waits are not held up by a full queue
    versions = {0: agent.get_weights()}
    rng = np.random.default_rng(0)
    served, learned = {}, []

    def half_written_update(batch):
        k = len(versions)  # this update makes version k
        learned.extend((k, rollout) for rollout in batch)
        new = {key: rng.normal(0.0, 0.7, w.shape).astype(w.dtype) for key, w in versions[0].items()}
        keys = sorted(new)
        agent.executor.set_weights({key: new[key] for key in keys[::2]}, strict=False)
        before = {i: worker.answered[i] for i in range(actors)}
        answered = answered_twice_more(worker, before, 30.0 if all(a for a, _ in served.values()) else 0.0)
        served[k] = (answered, sorted({slot.last.get("version") for slot in worker._slots.values()}))
        agent.executor.set_weights({key: new[key] for key in keys[1::2]}, strict=False)
        versions[k] = agent.get_weights()
        return {"loss": 0.0}

    agent.update = half_written_update
    per_update = agent.config.rollout.length * agent.config.env.num_envs * agent.config.rollout.batch_size
    try:
        worker.run(num_steps=updates * per_update)
        for k in range(1, updates + 1):
            assert served[k][0], f"no actor was answered twice while update {k} was in progress"
            assert served[k][1] == [k - 1], (k, served[k])  # the version published before, nothing newer
        wait_for(lambda: any(r["policy_versions"].max() == updates for r in list(worker._rollouts)))
    finally:
        worker.close()
    reference = IMPALAAgent(config(), backend=backend, seed=4)
    acted = collections.Counter()
    for rollout in [r for _, r in learned] + list(worker._rollouts):
        for version in np.unique(rollout["policy_versions"]):
            reference.set_weights(versions[int(version)])
            steps = rollout["policy_versions"] == version
            np.testing.assert_allclose(reference.rollout_logits(rollout)[0][:-1][steps],
                                       rollout["behaviour_logits"][steps], rtol=1e-4, atol=1e-5)
            acted[int(version)] += int(steps.sum())
    assert set(acted) == set(range(updates + 1)), acted  # every version acted
    expected_lag = collections.Counter(k - 1 - int(r["policy_versions"].min()) for k, r in learned)
    assert worker.policy_lag == expected_lag and sum(expected_lag.values()) == len(learned) == 2 * updates


def test_inference_holds_back_while_max_waiting_rollouts_wait_for_the_learner():
    """Each update returns only once the inference thread held back again (event order, not time): it resumed
    after the learner took a batch, and stopped answering with max_waiting rollouts waiting (plus at most one
    per actor from the batch that reached it), so acting never runs further ahead of learning."""
    actors, cap = 3, 4
    worker = make(actors=actors, max_waiting=cap)
    seen = []

    def until_held_back(batch):
        before, end = worker.held_back, time.monotonic() + (30.0 if all(ok for ok, _ in seen) else 0.0)
        while worker.held_back == before and time.monotonic() < end:
            time.sleep(0.005)
        seen.append((worker.held_back > before, len(worker._rollouts)))
        return {"loss": 0.0}

    worker.agent.update = until_held_back
    try:
        worker.run(num_steps=3 * 8 * 3 * 2)
    finally:
        worker.close()
    assert len(seen) == 3 and all(ok for ok, _ in seen), seen
    assert all(cap <= waiting <= cap + actors - 1 for _, waiting in seen), seen


@pytest.mark.parametrize("max_waiting", [1, 0, -3])
def test_a_max_waiting_below_a_batch_is_refused_by_name(max_waiting):
    with pytest.raises(ValueError, match=rf"max_waiting must be at least rollout.batch_size \(2\), or the learner "
                                         rf"waits for a batch that inference holds back; got {max_waiting}"):
        make(max_waiting=max_waiting)


@pytest.mark.parametrize("overlap", [True, False], ids=["overlap", "locked"])
def test_learning_publishes_each_update_and_inference_acts_with_the_newest(overlap):
    """Real updates: every rollout learned has its lag counted, and the inference copy holds the learner's
    weights once the last update is published (the learner's own weights changed); without overlap there is
    no copy: inference acts with the learner's policy."""
    worker = make(overlap=overlap)
    agent = worker.agent
    assert (worker.inference_agent is agent) is not overlap
    start = agent.get_weights()
    try:
        worker.run(num_steps=3 * 8 * 3 * 2)
        assert worker.total_updates == 3 and sum(worker.policy_lag.values()) == 6
        answered = sum(worker.answered.values())
        wait_for(lambda: sum(worker.answered.values()) > answered + 3)  # a batch begun after the last publication
        learner, inference = agent.get_weights(), worker.inference_agent.get_weights()
    finally:
        worker.close()
    assert not all(np.array_equal(start[k], learner[k]) for k in start)
    for key, value in learner.items():
        np.testing.assert_array_equal(inference[key], value, err_msg=key)
    assert worker.policy_lag_mean() is not None and worker.policy_lag_mean() >= 0
    from spacegraph.train.impala import distributed_summary

    assert distributed_summary(worker, "seed")[0].endswith(
        f"actors per call on average; policy lag {worker.policy_lag_mean():.2f} updates on average")


#: The learning criterion: the config's definition of solved within 400k env steps (2 actor threads, PyTorch) on
#: 1 of the seeds 0-2, run in order until one solves. Measured (issue 44, seeds 0-4): 4 of 5 solved, at
#: 100k-220k steps in 27-70 s; seed 4's screen reached 500 at 370k but no 100-episode mean did. At p = 0.8 a
#: correct agent fails 1 of 3 with probability 0.8% (one seed, the earlier test: 20%); expected runs 1.24,
#: at most 3. ``max_seconds`` bounds a hung run (a failed one took 113 s).
LEARNING = SeedCriterion(seeds=(0, 1, 2), required=1)
LEARNING_STEPS, LEARNING_MAX_SECONDS = 400_000, 170


def central_learning_run(seed: int) -> dict:
    """One learning run of central inference (2 actor threads) with ``seed``: solved_at, seconds, batches."""
    agent = IMPALAAgent(CONFIG, backend="torch", seed=seed)
    worker = CentralInferenceWorker(agent, lambda q: ThreadActorLearnerExecutor(2, q, {}), 2)
    start = time.perf_counter()
    try:
        result = Trainer(agent, worker=worker, progress=False, max_seconds=LEARNING_MAX_SECONDS).train(LEARNING_STEPS)
    finally:
        worker.close()
    return {"solved_at": result.solved_at_step, "seconds": time.perf_counter() - start,
            "stop": result.stop_reason, "batches": dict(worker.batch_sizes),
            "history": [(r["env_steps"], r["screen_return"], r["eval_return"]) for r in result.history]}


@pytest.mark.learning
def test_central_inference_learns_cartpole(record_property):
    def run(seed: int) -> dict:
        result = central_learning_run(seed)
        record_property("learning", f"central inference, seed {seed}: solved at {result['solved_at']} env steps in "
                                    f"{result['seconds']:.0f} s; inference batches {result['batches']}")
        return result

    verdict = LEARNING.run(run, solved=lambda r: r["solved_at"] is not None)
    assert verdict.passed, LEARNING.explain(
        verdict, f"central inference (2 actor threads) within {LEARNING_STEPS} env steps",
        lambda r: f"stopped by {r['stop']} after {r['seconds']:.0f} s; evaluations {r['history']}")

