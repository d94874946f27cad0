"""Ape-X configs: a DQN config (``reference_agents.agents.config``) plus an ``apex`` section for the topology.

``reference_agents/configs/apex_cartpole.yaml`` is a complete example::

    agent: apex
    ...every DQN section (backend, env, network, memory, loss, optimizer, update, target_sync, evaluation)...
    apex: {workers: 2, shards: 2, sample_steps: 50, epsilon: 0.4, alpha: 7, publish_every: 10, prefetch: 4,
           throttle: true}

The DQN sections mean what they mean for `DQNAgent`; ``memory`` describes the replay *all shards
together* hold: ``capacity`` (and ``frame_capacity``) are split over the shards; ``type: frames`` makes
each shard a host-side frame store (``form: graph`` is refused: a shard is a host-side actor) with the
section's ``compression`` and ``match_window``; ``type: prioritized``, or frames with ``prioritized: true``,
make the shards sample by priority, ``type: replay`` or ``prioritized: false`` uniformly. A plain DQN
config (``agent: dqn``) is also an Ape-X config, with the ``apex`` defaults: the same file runs locally
with `DQNAgent` and distributed with `ApexDriver`.
"""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import Field

from reference_agents.agents.config import (ConfigError, Section, load_agent_config, read_config_file,
                                            resolve_config_path)
from reference_agents.agents.dqn.config import DQNConfig


class ApexSection(Section):
    """The Ape-X topology and its schedules (the learner's updates are counted in learner updates)."""

    workers: int = Field(2, ge=1, description="acting workers (Ray actors), each on env.num_envs environments")
    shards: int = Field(2, ge=1, description="prioritized replay shards (Ray actors)")
    sample_steps: int = Field(50, ge=1, description="env steps (summed over a worker's envs) per sample call")
    epsilon: float = Field(0.4, ge=0.0, le=1.0, description="worker i explores with epsilon ** (1 + alpha i/(N-1))")
    alpha: float = Field(7.0, ge=0.0, description="the spread of the workers' epsilons")
    calls_in_flight: int = Field(2, ge=1, description="sample calls queued per worker (2: it starts the next while "
                                                      "the driver handles the last)")
    publish_every: int = Field(10, ge=1, description="learner updates between weight publications")
    prefetch: int = Field(4, ge=1, description="sampled batches the learner's queue holds")
    samples_in_flight: int = Field(2, ge=1, description="shard sample calls the learner keeps outstanding (to the "
                                                        "least-loaded live shards; the first answer is queued)")
    priority_every: int = Field(4, ge=1, description="batches of a shard whose new priorities the learner sends "
                                                     "back in one call")
    throttle: bool = Field(False, description="keep learner updates and env steps to the `update` schedule's "
                                              "ratio (repeats per `every` env steps), as local DQN does")
    max_update_lag: int = Field(100, ge=1, description="with throttle: workers wait while the learner is this "
                                                       "many updates behind the schedule")
    snapshot_every: int | None = Field(None, ge=1, description="env steps between shard snapshots (a dead shard "
                                                               "comes back from its last one); None: no snapshots "
                                                               "besides checkpoints")
    restarts: int = Field(100, ge=0, description="restarts allowed per actor")
    worker_cpus: float = Field(0.0, ge=0.0, description="CPUs a worker reserves where Ray schedules by CPUs")
    shard_cpus: float = Field(0.0, ge=0.0, description="CPUs a shard reserves")


class ApexConfig(DQNConfig):
    """A DQN config with the Ape-X topology."""

    agent: Literal["apex"] = "apex"  # type: ignore[assignment]
    apex: ApexSection = Field(default_factory=ApexSection)

    def dqn_config(self, **changes: Any) -> dict[str, Any]:
        """The DQN config of the learner and the workers (a dict, ``agent: dqn``), with ``changes`` applied."""
        data = self.model_dump(by_alias=True)
        data.pop("apex")
        data["agent"] = "dqn"
        data.update(changes)
        return data

    def shards_prioritized(self) -> bool:
        """Whether the shards sample by priority: ``memory.type`` prioritized, or frames with ``prioritized``;
        ``type: replay`` (uniform) makes them uniform."""
        return self.memory.type == "prioritized" or (self.memory.type == "frames" and self.memory.prioritized)

    def shard_capacity(self) -> int:
        """Transitions one shard holds: ``memory.capacity`` split over the shards (rounded up)."""
        return max(1, -(-self.memory.capacity // self.apex.shards))


def load_apex_config(config: str | os.PathLike | dict[str, Any] | DQNConfig,
                     overrides: dict[str, Any] | None = None,
                     apex: dict[str, Any] | None = None) -> tuple[ApexConfig, str]:
    """An `ApexConfig` from an Ape-X config or a plain DQN config (``agent: dqn``: the ``apex`` defaults).

    Args:
        config: a file path, a dict or a config object.
        overrides: top-level keys to replace (``backend``, ``seed``).
        apex: ``apex`` keys to replace (``workers``, ``shards`` from the command line).

    Raises:
        ConfigError: naming the file, the key path and what was expected.
    """
    if isinstance(config, DQNConfig):
        data, source = config.model_dump(by_alias=True), "<config>"
    elif isinstance(config, dict):
        data, source = dict(config), "<dict>"
    elif isinstance(config, (str, os.PathLike)):
        source = resolve_config_path(os.fspath(config))  # a file, or a bare name like apex_cartpole
        data = read_config_file(source)
    else:
        raise ConfigError("<config>", [("", f"expected a file path, a dict or a config; got {type(config).__name__}")])
    if not isinstance(data, dict):
        raise ConfigError(source, [("", f"expected a mapping at the top; got {type(data).__name__}")])
    kind = data.get("agent", "dqn")
    if kind not in ("dqn", "apex"):
        raise ConfigError(source, [("agent", f"Ape-X runs DQN configs: agent must be 'dqn' or 'apex'; got {kind!r}")])
    data = dict(data, agent="apex")
    section = dict(data.get("apex") or {})
    section.update({k: v for k, v in (apex or {}).items() if v is not None})
    data["apex"] = section
    try:
        cfg, _ = load_agent_config(data, overrides, model=ApexConfig)
    except ConfigError as exc:
        raise ConfigError(source, exc.problems) from None  # name the file, not the dict it was read into
    if cfg.memory.type == "frames" and cfg.memory.form == "graph":
        raise ConfigError(source, [("memory.form", "Ape-X's replay lives in shard actors, which are host-side "
                                                   "stores: use form: host (got 'graph')")])
    return cfg, source
