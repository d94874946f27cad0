"""The `Agent` and `Worker` protocols hold of what `Trainer` is handed: the reference agents, the one-process
worker, Ape-X's driver, and IMPALA's actor-learner and central-inference workers."""

from __future__ import annotations

import inspect

import pytest

from harness.execution.actors import InProcessActorExecutor
from reference_agents.agents import Agent, build_agent
from reference_agents.agents.apex import ApexDriver
from reference_agents.agents.impala.actor_learner import ActorLearnerWorker
from reference_agents.agents.impala.central_inference import CentralInferenceWorker
from reference_agents.workers import VectorEnvWorker, Worker


def protocol_members(protocol: type) -> tuple[list[str], list[str]]:
    """``(methods, attributes)`` the protocol declares."""
    methods = [n for n, v in vars(protocol).items() if inspect.isfunction(v) or isinstance(v, classmethod)]
    attributes = list(getattr(protocol, "__annotations__", {}))
    return methods, attributes


@pytest.mark.parametrize("config", ["dqn_cartpole", "impala_cartpole"])
def test_the_reference_agents_are_agents(config):
    agent = build_agent(config, backend="torch")
    assert isinstance(agent, Agent)
    assert agent.epsilon() is None or 0.0 <= agent.epsilon() <= 1.0


def test_the_one_process_worker_and_the_apex_driver_are_workers():
    agent = build_agent("dqn_cartpole", backend="torch")
    worker = VectorEnvWorker.for_agent(agent)
    executor = InProcessActorExecutor()
    try:
        driver = ApexDriver("apex_cartpole", executor, backend="torch")
        for candidate in (worker, driver):
            assert isinstance(candidate, Worker), type(candidate).__name__
        driver.close()
    finally:
        worker.close()
        executor.shutdown()


@pytest.mark.parametrize("cls", [ActorLearnerWorker, CentralInferenceWorker])
def test_the_impala_workers_have_every_worker_method(cls):
    methods, _ = protocol_members(Worker)
    assert methods and not [m for m in methods if not callable(getattr(cls, m, None))]


def test_an_object_missing_a_member_is_not_a_worker():
    agent = build_agent("dqn_cartpole", backend="torch")
    worker = VectorEnvWorker.for_agent(agent)
    try:
        assert isinstance(worker, Worker)
        del worker.total_updates
        assert not isinstance(worker, Worker)
    finally:
        worker.close()
