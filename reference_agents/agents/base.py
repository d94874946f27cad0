"""The `Agent` protocol: what `VectorEnvWorker`, `Trainer` and `spacegraph train` use of an agent.

`DQNAgent` and `IMPALAAgent` satisfy it; so must a user's agent named by dotted path in a config
(``agent: my_project.agents:MyAgent``, see `reference_agents.agents.registry`). It is a structural protocol:
nothing needs to subclass it, and ``isinstance(agent, Agent)`` checks that the methods are there.
"""

from __future__ import annotations

import copy
import os
from typing import Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel


@runtime_checkable
class Agent(Protocol):
    """An agent a worker steps environments with and a `Trainer` trains and checkpoints.

    Attributes:
        config_class: the pydantic model its configs are checked against (``agent``, ``backend``, ``seed``,
            an ``env`` section (`EnvConfig`) and an ``evaluation`` section (`EvaluationConfig`) at least).
        checkpoint_format: the ``format`` its checkpoints carry (how `load_checkpoint` finds the class).
        config: its checked config.
        backend: ``"tf"`` or ``"torch"``.
        seed: its seed.
        timesteps: env steps observed so far (the worker's step counter must agree at checkpoints).
    """

    config_class: ClassVar[type[BaseModel]]
    checkpoint_format: ClassVar[str]
    config: Any
    backend: str
    seed: int
    timesteps: int

    def get_actions(self, states: Any, explore: bool = True) -> Any:
        """Actions for a batch of states (one per environment)."""

    def observe(self, states: Any, actions: Any, rewards: Any, terminals: Any, next_states: Any,
                env_id: Any = None, truncated: Any = None) -> None:
        """Takes one lockstep step of transitions (one row per environment)."""

    def update_on_schedule(self) -> list[dict[str, Any]]:
        """Runs the updates due by now; returns their metrics (``loss`` at least), maybe none."""

    def epsilon(self) -> float | None:
        """The exploration rate now (None for agents that sample from their policy)."""

    def get_weights(self, everything: bool = False) -> dict[str, Any]:
        """The policy's weights by name (``everything``: all variables, optimizer slots included)."""

    def set_weights(self, weights: dict[str, Any]) -> None:
        """Loads weights `get_weights` returned (an actor takes the learner's this way)."""

    def save_checkpoint(self, directory: str | os.PathLike) -> str:
        """Writes a checkpoint folder `load_checkpoint` reads; returns it."""

    @classmethod
    def load_checkpoint(cls, directory: str, backend: str | None = None) -> "Agent":
        """The agent a checkpoint folder holds, restored (on ``backend`` or the saved one)."""


def close_agent(agent: Any) -> None:
    """Ends what an agent holds outside this process: its ``close()`` when it has one, else its executor's
    (`GraphExecutor.close` of `DQNAgent`, `IMPALAAgent`: the replica processes of an ``execution.strategy`` in
    mode ``processes``). Idempotent; an agent with neither (a user's: the `Agent` protocol does not ask for one)
    is left as it is."""
    close = getattr(agent, "close", None)
    if not callable(close):
        close = getattr(getattr(agent, "executor", None), "close", None)
    if callable(close):
        close()


def with_strategy(config: dict[str, Any], strategy: dict[str, Any] | str) -> dict[str, Any]:
    """A copy of a config dict whose ``execution.strategy`` is ``strategy`` (the rest of ``execution``, ``trace``
    and ``replay``, kept; the older form's ``execution.devices`` dropped)."""
    config = copy.deepcopy(config)
    execution = dict(config.get("execution") or {})
    execution.pop("devices", None)
    execution["strategy"] = strategy
    config["execution"] = execution
    return config


def acting_config(config: dict[str, Any]) -> dict[str, Any]:
    """A copy of a config dict for an agent that only acts (an IMPALA actor, an Ape-X worker): its
    ``execution.strategy`` is ``local``, since replicas of the update are the learner's alone (an actor that kept a
    ``processes`` strategy would start replica processes of its own)."""
    return with_strategy(config, "local")
