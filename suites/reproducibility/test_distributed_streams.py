"""What a distributed run does reproduce (docs/reproducibility.md): each IMPALA actor's and each Ape-X worker's
stream, given its derived seed and the weights it acts with. Which rollouts reach the learner first, and which
weights an actor holds later, depend on scheduling and are not reproduced; these tests pin the part that is.

The actor body (`impala_actor`) and the Ape-X worker (`ApexWorker`) run here in this process, on in-process
queues and a weight store: the same code a Ray, tf-dist or thread executor runs in each actor.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from harness.execution.transport import InProcessWeightStore, QueueClosed
from harness.seeds import derive_seed

CONFIGS = Path(__file__).resolve().parents[2] / "reference_agents" / "configs"
RUN_SEED = 5


def config(name: str, **changes: Any) -> dict[str, Any]:
    cfg = yaml.safe_load((CONFIGS / f"{name}.yaml").read_text(encoding="utf-8"))
    cfg.update(backend="torch", seed=RUN_SEED, **changes)
    return cfg


class FirstRollout:
    """The ``rollouts`` queue of one actor: keeps the first rollout put, then closes (the actor's cue to stop)."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def put(self, record: dict[str, Any], timeout: float | None = None) -> None:
        if self.records:
            raise QueueClosed("one rollout is enough")
        self.records.append(record)


class Episodes:
    def put(self, record: dict[str, Any], timeout: float | None = None) -> None:
        pass


class Transport:
    def __init__(self, weights: dict[str, np.ndarray]) -> None:
        self.queues = {"rollouts": FirstRollout(), "episodes": Episodes()}
        self.weights = InProcessWeightStore()
        self.weights.publish(weights)


@pytest.fixture(scope="module")
def impala():
    from reference_agents.agents import IMPALAAgent

    cfg = config("impala_cartpole", env={"id": "CartPole-v1", "num_envs": 4})
    return cfg, IMPALAAgent(cfg).get_weights()


def first_rollout(impala, index: int, incarnation: int = 0) -> dict[str, Any]:
    from reference_agents.agents.impala.actor_learner import impala_actor

    cfg, weights = impala
    transport = Transport(weights)
    impala_actor(transport, index, incarnation, cfg, "torch", RUN_SEED)
    (record,) = transport.queues["rollouts"].records
    return record


#: Record fields that name who sent it, not what it played.
LABELS = {"actor", "incarnation", "tag"}


def same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two records played the same (their labels aside)."""
    keys = sorted(set(a) - LABELS)
    return keys == sorted(set(b) - LABELS) and all(np.array_equal(np.asarray(a[k]), np.asarray(b[k])) for k in keys)


def test_an_impala_actors_first_rollout_repeats(impala):
    first = first_rollout(impala, 1)
    assert same(first, first_rollout(impala, 1))
    assert not same(first, first_rollout(impala, 2))  # another actor: other environments, other draws
    assert not same(first, first_rollout(impala, 1, incarnation=1))  # a restarted actor plays other episodes


def test_an_impala_actor_starts_its_environments_from_its_derived_seed(impala):
    from reference_agents.workers import VectorEnv

    envs = VectorEnv("CartPole-v1", 4)
    try:
        start = envs.reset(seed=derive_seed(RUN_SEED, "actor", 3))
    finally:
        envs.close()
    states = np.asarray(first_rollout(impala, 3)["rollout_states"])  # [T + 1, N, 4], time-major
    assert np.array_equal(states[0], start.astype(states.dtype))


def apex_sample(index: int, incarnation: int = 0, steps: int = 60) -> dict[str, Any]:
    from reference_agents.agents.apex.agent import ApexAgent
    from reference_agents.agents.apex.worker import ApexWorker

    cfg = config("apex_cartpole", network={"layers": [{"type": "dense", "units": 32, "activation": "relu"}],
                                           "dueling": True})
    worker = ApexWorker(cfg, index, epsilon=0.4)
    try:
        worker.set_weights(ApexAgent(cfg).get_weights(), 1)
        if incarnation:
            worker.set_incarnation(incarnation)
        out = worker.sample(steps)
        return {**out["records"], "priorities": out["priorities"]}
    finally:
        worker.worker.close()


def test_an_apex_workers_first_sample_repeats():
    first = apex_sample(1)
    assert same(first, apex_sample(1))
    assert not same(first, apex_sample(2))
    assert not same(first, apex_sample(1, incarnation=1))
