"""`ApexWorker`: an Ape-X actor: its own DQN graph with a constant epsilon, sampling n-step transitions with
initial priorities on a `VectorEnvWorker` (nothing observed, nothing learned)."""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

from harness.seeds import derive_seed
from reference_agents.agents.apex.agent import ApexAgent
from reference_agents.agents.apex.transport import pack_records
from reference_agents.workers import VectorEnvWorker


class ApexWorker:
    """Acts with epsilon ``epsilon`` on the config's environments and hands back folded transitions.

    Args:
        config: the Ape-X config (a dict).
        index: the worker's index (its seed is ``derive_seed(seed, "apex_worker", index)``, `harness.seeds`).
        epsilon: its constant exploration rate (`apex_epsilons`).
        threads: framework threads of this process.
    """

    def __init__(self, config: dict[str, Any], index: int, epsilon: float, threads: int = 1) -> None:
        import warnings

        from harness.backends import set_threads

        # weights arrive read-only from an object store; they are copied into the network's variables
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")

        set_threads(config.get("backend", "tf"), threads)
        self.index, self.epsilon = int(index), float(epsilon)
        self.run_seed = int(config.get("seed", 0))
        self.agent = ApexAgent(config, seed=derive_seed(self.run_seed, "apex_worker", self.index),
                               exploration={"type": "constant", "value": float(epsilon)})
        self.worker = VectorEnvWorker.for_agent(self.agent, observe=False, update=False, compute_priorities=True)
        self.weights_version = -1
        # tells the driver when the engine replaced this object without a failing call (a crash between calls)
        self.instance = f"{os.getpid()}-{id(self)}-{time.time_ns()}"

    def set_weights(self, weights: dict[str, Any], version: int) -> int:
        """Loads the learner's Q-network weights (publication ``version``); returns the version."""
        self.agent.set_weights(weights, sync_target=False)
        self.weights_version = int(version)
        return self.weights_version

    def set_incarnation(self, incarnation: int) -> str:
        """A restarted worker plays other episodes than its first incarnation did (the seed moves on); returns
        this object's instance token."""
        self.worker.seed = derive_seed(self.run_seed, "apex_worker", self.index, int(incarnation))
        return self.instance

    def sample(self, num_steps: int) -> dict[str, Any]:
        """``num_steps`` env steps: the finished transitions, their initial priorities (from the act-time
        Q-values, `ActTimePriorities`), the finished episodes (as dicts) and the counts."""
        batch = self.worker.sample(int(num_steps))
        return {"records": batch.records, "priorities": batch.priorities, "steps": batch.stats.steps,
                "frames": batch.stats.frames, "seconds": batch.stats.seconds,
                "episodes": [dataclasses.asdict(e) for e in batch.stats.episodes],
                "weights_version": self.weights_version}

    def sample_split(self, num_steps: int) -> tuple[dict[str, Any], dict[str, Any]]:
        """`sample` as ``(counts and episodes, transitions)``: the driver reads the first and forwards the second
        to a shard without fetching it; frame stacks travel packed (`pack_records`)."""
        out = self.sample(num_steps)
        payload = {"records": pack_records(out.pop("records")), "priorities": out.pop("priorities")}
        out["transitions"] = len(payload["priorities"]) if payload["priorities"] is not None else 0
        out["instance"] = self.instance
        return out, payload

    def info(self) -> dict[str, Any]:
        """What the driver needs to know of the environments: counts and frames per step."""
        return {"num_envs": self.worker.num_envs, "frames_per_step": self.worker.frames_per_step,
                "total_steps": self.worker.total_steps}

    def close(self) -> None:
        self.worker.close()
