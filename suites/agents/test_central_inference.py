"""Central batched inference (SEED RL style) in one process (actor threads): the learner's actions are its
policy's, every request is answered once and in order, recurrent state stays with its environment, an
actor that stops never holds the others back longer than the batching timeout."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
import yaml

from harness.execution.transport import ThreadActorLearnerExecutor
from reference_agents.agents import IMPALAAgent
from reference_agents.training import Trainer
from reference_agents.agents.impala.central_inference import CentralInferenceWorker, env_actor

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
    worker = make(lstm)
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
    worker = make()
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


def test_an_actor_that_sends_nothing_never_holds_the_batch_beyond_the_timeout():
    worker = make(actors=3, executor=StallingExecutor, timeout_ms=5.0)
    try:
        worker.start()
        wait_for(lambda: min(worker.answered.get(1, 0), worker.answered.get(2, 0)) >= 50)
        assert 0 not in worker.answered
        assert worker.max_wait < 0.005 + 0.05  # the timeout, plus scheduling slack on a loaded machine
    finally:
        worker.close()


@pytest.mark.learning
def test_central_inference_learns_cartpole(record_property):
    agent = IMPALAAgent(CONFIG, backend="torch", seed=0)
    worker = CentralInferenceWorker(agent, lambda q: ThreadActorLearnerExecutor(2, q, {}), 2)
    start = time.perf_counter()
    try:
        result = Trainer(agent, worker=worker, progress=False, max_seconds=170).train(400_000)
    finally:
        worker.close()
    record_property("learning", f"central inference: solved at {result.solved_at_step} env steps in "
                                f"{time.perf_counter() - start:.0f} s; inference batches {dict(worker.batch_sizes)}")
    assert result.solved_at_step is not None
