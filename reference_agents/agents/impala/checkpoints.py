"""Checkpoints of an `IMPALAAgent`: every graph variable and the Python-side counters, written atomically."""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from harness.execution.formats import declare_format
from harness.execution.serialization import BadFileError, fields, read_npz
from reference_agents.agents.checkpoints import (
    CHECKPOINT_STATE, CHECKPOINT_WEIGHTS, atomic_savez, build_saved_agent, read_agent_state, write_agent_state)

CHECKPOINT_FORMAT = "spacegraph-impala-checkpoint"
MODEL_FORMAT = "spacegraph-impala-model"
# Format 1: what spacegraph wrote before formats carried versions (docs/checkpoints.md lists the formats).
declare_format(CHECKPOINT_FORMAT, 1, "an IMPALA checkpoint")
declare_format(MODEL_FORMAT, 1, "an IMPALA model file")


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
        atomic_savez(os.path.join(directory, CHECKPOINT_WEIGHTS),
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
        write_agent_state(directory, meta, outbox)
        return directory

    def restore(self, directory: str) -> None:
        """Loads a checkpoint `save_checkpoint` wrote (either backend) into this agent.

        Raises:
            BadFileError: (a ValueError) naming the file that is missing, damaged or does not fit this agent;
                nothing changes then.
            ValueError: when the checkpoint is for other state or action spaces.
        """
        directory = os.fspath(directory)
        where = f"{type(self).__name__}.restore: {directory} holds no readable agent checkpoint"
        state_path, weights_path = (os.path.join(directory, f) for f in (CHECKPOINT_STATE, CHECKPOINT_WEIGHTS))
        try:
            meta, arrays = read_agent_state(directory, CHECKPOINT_FORMAT)
            _, variables = read_npz(weights_path, "an agent checkpoint's variables file")
            counters = fields(state_path, meta, timesteps=int, updates=int, rollouts_made=int, rollouts_learned=int,
                              outbox=int, tag=int, state_space=str, action_space=str)
            timesteps, updates, made, learned, count, tag, state_space, action_space = counters
            if state_space != repr(self.state_space) or action_space != repr(self.action_space):
                raise ValueError(f"{type(self).__name__}.restore: {directory} is for states {state_space} and "
                                 f"actions {action_space}; this agent has {self.state_space!r} and "
                                 f"{self.action_space!r}")
            outbox = _saved_outbox(state_path, count, arrays)
        except BadFileError as exc:
            raise exc.within(where) from None
        try:
            self.executor.set_weights({k[2:]: v for k, v in variables.items() if k.startswith("w:")})
        except ValueError as exc:
            raise BadFileError(weights_path, f"does not fit this agent: {exc} (was it saved with another config?)",
                               where) from None
        self.timesteps, self.updates, self.rollouts_made, self.rollouts_learned = timesteps, updates, made, learned
        self.outbox.clear()
        self.outbox.extend(outbox)
        self._builder = type(self._builder)(self.config.rollout.length, self.recurrent)
        self._builder.tag = tag
        self.reset_preprocessor(range(self._starts.shape[0]))

    @classmethod
    def load_checkpoint(cls, directory: str, backend: str | None = None) -> Any:
        """A new agent built from the config saved in ``directory`` (on ``backend`` or the saved one), restored.

        Raises:
            BadFileError: (a ValueError) naming the checkpoint file that is missing, damaged or does not fit.
        """
        return build_saved_agent(cls, os.fspath(directory), backend)


def _saved_outbox(path: str, count: int, arrays: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """The ``count`` finished rollouts a checkpoint's state file holds.

    Raises:
        BadFileError: naming ``path`` when they do not read back.
    """
    outbox = []
    try:
        for i in range(count):
            prefix = f"o:{i}:"
            rollout: dict[str, Any] = {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}
            if "h" in rollout:
                rollout["initial_state"] = (rollout.pop("h"), rollout.pop("c"))
            rollout["tag"] = int(rollout["tag"])
            outbox.append(rollout)
    except (KeyError, ValueError, TypeError) as exc:
        raise BadFileError(path, f"has finished rollouts that do not read back ({type(exc).__name__}: {exc})") \
            from None
    return outbox
