"""Checkpoints of an `IMPALAAgent`: every graph variable and the Python-side counters, written atomically."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import numpy as np

from reference_agents.agents.checkpoints import CHECKPOINT_STATE, CHECKPOINT_WEIGHTS, _atomic_savez

CHECKPOINT_FORMAT = "spacegraph-impala-checkpoint"


class IMPALACheckpointMixin:
    """`save_checkpoint`/`restore`/`load_checkpoint` of an `IMPALAAgent` (the files `Trainer` resumes from).

    A checkpoint holds every variable (policy and optimizer slots) and the counters. Environment states are
    not part of it, so a rollout in progress when it was saved cannot continue: it is dropped, and a
    restored agent starts its next rollout (and every recurrent state) afresh. Finished rollouts still
    waiting in the outbox are kept.
    """

    def save_checkpoint(self, directory: str) -> str:
        """Writes the checkpoint into ``directory`` (each file replaced atomically); returns the directory."""
        os.makedirs(directory, exist_ok=True)
        _atomic_savez(os.path.join(directory, CHECKPOINT_WEIGHTS),
                      {f"w:{k}": v for k, v in self.executor.get_weights().items()})
        outbox = {}
        for i, rollout in enumerate(self.outbox):
            for key, value in rollout.items():
                if key == "initial_state":
                    outbox[f"o:{i}:h"], outbox[f"o:{i}:c"] = value
                else:
                    outbox[f"o:{i}:{key}"] = np.asarray(value)
        meta = {"format": CHECKPOINT_FORMAT, "config": self.config.model_dump(by_alias=True),
                "backend": self.backend, "state_space": repr(self.state_space),
                "action_space": repr(self.action_space), "saved_at": time.time(), "timesteps": self.timesteps,
                "updates": self.updates, "rollouts_made": self.rollouts_made,
                "rollouts_learned": self.rollouts_learned, "outbox": len(self.outbox), "tag": self._builder.tag}
        _atomic_savez(os.path.join(directory, CHECKPOINT_STATE), {"__meta__": np.array(json.dumps(meta)), **outbox})
        return directory

    def restore(self, directory: str) -> None:
        """Loads a checkpoint `save_checkpoint` wrote (either backend) into this agent.

        Raises:
            ValueError: naming the directory and what is missing or does not fit; nothing changes then.
        """
        try:
            with np.load(os.path.join(directory, CHECKPOINT_STATE), allow_pickle=False) as data:
                meta = json.loads(str(data["__meta__"]))
                arrays = {k: data[k] for k in data.files if k != "__meta__"}
            with np.load(os.path.join(directory, CHECKPOINT_WEIGHTS), allow_pickle=False) as data:
                weights = {k[2:]: data[k] for k in data.files if k.startswith("w:")}
        except (OSError, KeyError, ValueError) as exc:
            raise ValueError(f"IMPALAAgent.restore: {directory} holds no readable agent checkpoint: {exc}") from None
        if meta.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(f"IMPALAAgent.restore: {directory} is not an IMPALA checkpoint "
                             f"(format {meta.get('format')!r})")
        if meta.get("state_space") != repr(self.state_space) or meta.get("action_space") != repr(self.action_space):
            raise ValueError(f"IMPALAAgent.restore: {directory} is for states {meta.get('state_space')} and "
                             f"actions {meta.get('action_space')}; this agent has {self.state_space!r} and "
                             f"{self.action_space!r}")
        try:
            self.executor.set_weights(weights)
        except ValueError as exc:
            raise ValueError(f"IMPALAAgent.restore: {directory}: {exc} (was it saved with another config?)") from None
        self.timesteps, self.updates = int(meta["timesteps"]), int(meta["updates"])
        self.rollouts_made, self.rollouts_learned = int(meta["rollouts_made"]), int(meta["rollouts_learned"])
        self.outbox.clear()
        for i in range(int(meta["outbox"])):
            prefix = f"o:{i}:"
            rollout: dict[str, Any] = {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}
            if "h" in rollout:
                rollout["initial_state"] = (rollout.pop("h"), rollout.pop("c"))
            rollout["tag"] = int(rollout["tag"])
            self.outbox.append(rollout)
        self._builder = type(self._builder)(self.config.rollout.length, self.recurrent)
        self._builder.tag = int(meta["tag"])
        self.reset_preprocessor(range(self._starts.shape[0]))

    @classmethod
    def load_checkpoint(cls, directory: str, backend: str | None = None) -> Any:
        """A new agent built from the config saved in ``directory`` (on ``backend`` or the saved one), restored."""
        try:
            with np.load(os.path.join(directory, CHECKPOINT_STATE), allow_pickle=False) as data:
                meta = json.loads(str(data["__meta__"]))
        except (OSError, KeyError, ValueError) as exc:
            raise ValueError(f"IMPALAAgent.load_checkpoint: {directory} holds no readable agent checkpoint: "
                             f"{exc}") from None
        agent = cls(meta["config"], backend=backend or meta["backend"], state_space=meta["state_space"],
                    action_space=meta["action_space"])
        agent.restore(directory)
        return agent
