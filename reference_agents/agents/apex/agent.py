"""`ApexAgent`: the DQN graph an Ape-X config gives its learner and each worker (without Ape-X's replay)."""

from __future__ import annotations

from typing import Any

from reference_agents.agents.apex.config import load_apex_config
from reference_agents.agents.dqn.agent import DQNAgent

#: The replay of a worker's and the learner's own graph: never written (the shards hold the replay).
UNUSED_MEMORY = {"type": "replay", "capacity": 1}


class ApexAgent(DQNAgent):
    """A `DQNAgent` from an Ape-X (or DQN) config, its graph's replay left unused: the learner and the workers.

    Args:
        config: an Ape-X or DQN config (file, dict or object).
        backend, seed: override the config's.
        exploration: replaces the config's exploration schedule (a worker's constant epsilon).
        **kwargs: `DQNAgent`'s ``state_space`` / ``action_space``.

    Attributes:
        apex_config: the whole `ApexConfig`.
    """

    def __init__(self, config: Any, backend: str | None = None, seed: int | None = None,
                 exploration: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self.apex_config, _ = load_apex_config(config, {"backend": backend, "seed": seed})
        changes: dict[str, Any] = {"memory": dict(UNUSED_MEMORY)}
        if exploration is not None:
            changes["exploration"] = exploration
        super().__init__(self.apex_config.dqn_config(**changes), **kwargs)
