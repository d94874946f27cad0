"""The `Worker` protocol: what `Trainer` uses of the thing that steps environments for an agent.

`VectorEnvWorker` (one process), IMPALA's `ActorLearnerWorker` and `CentralInferenceWorker`, and Ape-X's
`ApexDriver` satisfy it; ``isinstance(worker, Worker)`` checks the methods are there.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, runtime_checkable

from reference_agents.workers.results import Episode, WorkerStats


@runtime_checkable
class Worker(Protocol):
    """Steps environments for an agent, counts what it did, and evaluates the agent's greedy policy.

    Attributes:
        num_envs: environments stepped in lockstep (per actor for distributed workers).
        seed: the base seed of its environments.
        frames_per_step: env frames per env step (Atari frame skip; 1 elsewhere).
        total_steps, total_frames, total_updates: counters over the run (resumed runs included).
        last_loss: the loss of the last update (None before the first).
        episodes: the finished training episodes, in order.
    """

    num_envs: int
    seed: int
    frames_per_step: float
    total_steps: int
    total_frames: int
    total_updates: int
    last_loss: float | None
    episodes: list[Episode]

    def run(self, num_steps: int | None = None, num_episodes: int | None = None,
            callback: Callable[[WorkerStats], Any] | None = None, callback_every: int = 1000) -> WorkerStats:
        """Steps until ``num_steps`` more env steps (or episodes); ``callback`` returning False stops early."""

    def mean_return(self, last: int = 100) -> float:
        """The mean return of the last ``last`` finished episodes (NaN before the first)."""

    def evaluate(self, num_episodes: int, num_envs: int | None = None, seed: int | None = None,
                 max_steps: int | None = None) -> list[float]:
        """Greedy returns of ``num_episodes`` episodes on environments of its own."""

    def state_dict(self) -> dict[str, Any]:
        """Counters and episodes, JSON-safe (``worker.json`` of a checkpoint)."""

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores `state_dict`'s counters and episodes."""

    def close(self) -> None:
        """Closes its environments (and a distributed worker's actors)."""
