"""Central inference across processes (actors on a gRPC stream, or on TF servers, at 127.0.0.1): a killed actor is dropped from the
batches at once, the others go on, and it comes back as a new incarnation whose environments start afresh."""

from __future__ import annotations

import os
import time

import pytest
import yaml

from harness.execution.grpc_stream import GrpcActorLearnerExecutor
from harness.execution.tf_dist import TFActorLearnerExecutor
from reference_agents.agents import IMPALAAgent
from reference_agents.agents.impala.central_inference import CentralInferenceWorker

pytestmark = pytest.mark.distributed

CONFIG = os.path.join(os.path.dirname(__file__), "..", "..", "reference_agents", "configs", "impala_cartpole.yaml")


@pytest.mark.parametrize("transport", ["grpc", "tf-dist"])
def test_a_killed_actor_is_dropped_and_reconnects_while_the_others_go_on(capsys, transport):
    with open(CONFIG) as fh:
        cfg = yaml.safe_load(fh)
    cfg.update(env={"id": "CartPole-v1", "num_envs": 4}, rollout={"length": 10, "batch_size": 1})
    agent = IMPALAAgent(cfg, backend="torch", seed=0)
    executor = GrpcActorLearnerExecutor if transport == "grpc" else TFActorLearnerExecutor
    worker = CentralInferenceWorker(agent, lambda q: executor(2, q, {}), 2)
    try:
        deadline = time.monotonic() + 90
        while min(worker.answered.get(0, 0), worker.answered.get(1, 0)) < 20 and time.monotonic() < deadline:
            worker.run(num_steps=400)
        worker.executor.kill(0)
        killed_at = dict(worker.answered)
        deadline = time.monotonic() + 90
        while worker._slots[0].incarnation == 0 and time.monotonic() < deadline:  # actor 0 restarting (~10 s)
            worker.run(num_steps=400)
        during = worker.answered[1] - killed_at[1]
        while worker.answered[0] < killed_at[0] + 20 and time.monotonic() < deadline:
            worker.run(num_steps=400)
        assert during > 20, "actor 1 waited for the dead actor 0"
        assert worker._slots[0].incarnation == 1 and worker.answered[0] >= killed_at[0] + 20
        assert [(r.index, r.restarted) for r in worker.executor.failures] == [(0, True)]
        assert "actor 0 (incarnation 0" in capsys.readouterr().err
        assert sum(worker.received.values()) * 10 * 4 == worker.total_steps
    finally:
        worker.close()
