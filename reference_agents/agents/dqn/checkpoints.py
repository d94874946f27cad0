"""Model files and checkpoints of a `DQNAgent`: export/import of the Q-network, save/restore of everything."""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from harness.execution.formats import declare_format
from harness.execution.serialization import BadFileError, fields, read_npz
from reference_agents.agents.checkpoints import (CHECKPOINT_REPLAY, CHECKPOINT_STATE, CHECKPOINT_WEIGHTS,
                                                 META_MEMBER, atomic_savez, build_saved_agent, export_agent_model,
                                                 read_agent_state, write_agent_state)
from reference_agents.components.helpers import NStepAccumulator

CHECKPOINT_FORMAT = "spacegraph-dqn-checkpoint"
MODEL_FORMAT = "spacegraph-dqn-model"
# Format 1: what spacegraph wrote before formats carried versions (docs/checkpoints.md lists the formats).
declare_format(CHECKPOINT_FORMAT, 1, "a DQN checkpoint")
declare_format(MODEL_FORMAT, 1, "a DQN model file")


class CheckpointMixin:
    """`export_model`/`import_model` (the Q-network and config) and `save_checkpoint`/`restore`/
    `load_checkpoint` (graph variables, host-side replay and the Python-side state)."""

    def export_model(self, path: str) -> str:
        """Writes the Q-network's weights and the config to ``path`` (``.npz``, atomically); returns the path."""
        return export_agent_model(self, path, MODEL_FORMAT)

    def import_model(self, path: str) -> None:
        """Loads a file `export_model` wrote (from either backend) into the online and target networks.

        Raises:
            BadFileError: (a ValueError) naming the file and what does not fit; the agent is unchanged then.
        """
        path = os.fspath(path)
        where = f"{type(self).__name__}.import_model"
        try:
            meta, arrays = read_npz(path, "a DQN model file", meta_key=META_MEMBER, formats=MODEL_FORMAT)
        except BadFileError as exc:
            raise exc.within(where) from None
        if meta.get("num_actions") != self.num_actions or meta.get("state_space") != repr(self.state_space):
            raise BadFileError(path, f"is for states {meta.get('state_space')} and {meta.get('num_actions')} "
                                     f"actions; this agent has {self.state_space!r} and {self.num_actions}", where)
        try:
            self.set_weights({k[2:]: v for k, v in arrays.items() if k.startswith("w:")})
        except ValueError as exc:
            raise BadFileError(path, f"does not fit this agent: {exc}", where) from None

    def state_dict(self) -> dict[str, Any]:
        """The Python-side state: counters, open n-step windows and staged transitions."""
        return {"timesteps": self.timesteps, "updates": self.updates, "updates_due_at": self._updates_due_at,
                "accumulators": {str(k): a.state_dict() for k, a in self._accumulators.items()},
                "staged": list(self._staged)}

    def save_checkpoint(self, directory: str) -> str:
        """Writes everything needed to continue training into ``directory``: every graph variable (networks,
        target, optimizer state, replay contents) and the Python-side state. Files are replaced atomically,
        so an interrupted save leaves the previous checkpoint intact. Returns the directory."""
        os.makedirs(directory, exist_ok=True)
        self.flush()  # staged transitions go to replay, where the variables keep them
        atomic_savez(os.path.join(directory, CHECKPOINT_WEIGHTS),
                      {f"w:{k}": v for k, v in self.executor.get_weights().items()})
        atomic_savez(os.path.join(directory, CHECKPOINT_REPLAY), self.replay.state_dict())
        state = self.state_dict()
        windows = {}
        for env, acc in state["accumulators"].items():
            for j, (s, a, r) in enumerate(acc["steps"]):
                windows[f"s:{env}:{j}"] = np.asarray(s)
                windows[f"a:{env}:{j}"] = np.asarray(a)
                windows[f"r:{env}:{j}"] = np.asarray(r)
            if acc["steps"]:
                windows[f"next:{env}"] = np.asarray(acc["last_next_state"])
            acc["steps"] = len(acc["steps"])
            acc.pop("last_next_state")
        meta = {"format": CHECKPOINT_FORMAT, "config": self.config.model_dump(by_alias=True),
                "backend": self.backend, "state_space": repr(self.state_space),
                "action_space": repr(self.action_space), "saved_at": time.time(),
                "timesteps": state["timesteps"], "updates": state["updates"],
                "updates_due_at": state["updates_due_at"], "accumulators": state["accumulators"]}
        write_agent_state(directory, meta, windows)
        return directory

    def restore(self, directory: str) -> None:
        """Loads a checkpoint `save_checkpoint` wrote (either backend) into this agent.

        Environment states are not part of a checkpoint, so the episodes in progress when it was
        saved cannot continue: their open n-step windows are closed as cut short (bootstrapping
        from the last observed state with ``gamma^k``, like a time limit) and staged for replay.

        Raises:
            BadFileError: (a ValueError) naming the file that is missing, damaged or does not fit this agent;
                the weights and counters are unchanged then (a replay file that does not fit can leave the
                replay partly loaded).
            ValueError: when the checkpoint is for other state or action spaces.
        """
        directory = os.fspath(directory)
        where = f"{type(self).__name__}.restore: {directory} holds no readable agent checkpoint"
        state_path, weights_path, replay_path = (os.path.join(directory, f) for f in (
            CHECKPOINT_STATE, CHECKPOINT_WEIGHTS, CHECKPOINT_REPLAY))
        try:
            meta, arrays = read_agent_state(directory, CHECKPOINT_FORMAT)
            _, variables = read_npz(weights_path, "an agent checkpoint's variables file")
            _, replay = read_npz(replay_path, "an agent checkpoint's replay file")
            timesteps, updates, due, accumulators, state_space, action_space = fields(
                state_path, meta, timesteps=int, updates=int, updates_due_at=int, accumulators=dict,
                state_space=str, action_space=str)
            if state_space != repr(self.state_space) or action_space != repr(self.action_space):
                raise ValueError(f"{type(self).__name__}.restore: {directory} is for states {state_space} and "
                                 f"actions {action_space}; this agent has {self.state_space!r} and "
                                 f"{self.action_space!r}")
            restored, staged = restore_windows(state_path, accumulators, arrays, tuple(self.state_space.shape))
            if replay and not self.replay.state_dict():
                raise BadFileError(replay_path, f"holds {sorted(replay)[:4]}, but this agent's replay lives in its "
                                                f"graph variables (the file must be empty)")
        except BadFileError as exc:
            raise exc.within(where) from None
        previous = self.executor.get_weights()
        try:
            self.executor.set_weights({k[2:]: v for k, v in variables.items() if k.startswith("w:")})
        except ValueError as exc:
            raise BadFileError(weights_path, f"does not fit this agent: {exc} (was it saved with another config?)",
                               where) from None
        try:
            if replay or self.replay.state_dict():
                self.replay.load_state_dict(replay)
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            self.executor.set_weights(previous)
            raise BadFileError(replay_path, f"does not fit this agent's replay: {type(exc).__name__}: {exc} (was it "
                                            f"saved with another config?)", where) from None
        self.timesteps, self.updates, self._updates_due_at = timesteps, updates, due
        self._accumulators, self._staged = restored, staged

    @classmethod
    def load_checkpoint(cls, directory: str, backend: str | None = None) -> "CheckpointMixin":
        """A new agent built from the config saved in ``directory`` (on ``backend`` or the saved one), restored.

        Raises:
            BadFileError: (a ValueError) naming the checkpoint file that is missing, damaged or does not fit.
        """
        directory = os.fspath(directory)
        return build_saved_agent(cls, directory, backend)


def _window_step(arrays: dict[str, np.ndarray], env: str, j: int, state_shape: tuple[int, ...]) -> tuple:
    """Step ``j`` of env ``env``'s saved n-step window: ``(state, action, reward)``, checked."""
    s, a, r = arrays[f"s:{env}:{j}"], arrays[f"a:{env}:{j}"], arrays[f"r:{env}:{j}"]
    if s.shape != state_shape or a.shape != () or a.dtype.kind not in "iu" or r.shape != ():
        raise ValueError(f"step {j} of env {env} has a state of shape {s.shape} (expected {state_shape}), an action "
                         f"{a.dtype}{list(a.shape)} and a reward of shape {r.shape} (expected scalars)")
    return s, a.item(), float(r)


def restore_windows(path: str, accumulators: dict[str, Any], arrays: dict[str, np.ndarray],
                     state_shape: tuple[int, ...]) -> tuple[dict[int, NStepAccumulator], list[dict[str, Any]]]:
    """The open n-step windows a checkpoint saved, rebuilt and closed as cut short: ``(accumulators, staged)``.

    Raises:
        BadFileError: naming ``path`` when they do not read back.
    """
    restored: dict[int, NStepAccumulator] = {}
    staged: list[dict[str, Any]] = []
    try:
        for env, acc in accumulators.items():
            steps = [_window_step(arrays, env, j, state_shape) for j in range(int(acc["steps"]))]
            if steps and arrays[f"next:{env}"].shape != state_shape:
                raise ValueError(f"the next state of env {env} has shape {arrays[f'next:{env}'].shape}")
            window = NStepAccumulator(acc["n"], acc["gamma"])
            window.load_state_dict({"n": acc["n"], "gamma": acc["gamma"], "steps": steps,
                                    "last_next_state": arrays.get(f"next:{env}")})
            staged += window.flush()
            restored[int(env)] = window
    except (KeyError, ValueError, TypeError, IndexError, AttributeError) as exc:
        raise BadFileError(path, f"has open n-step windows that do not read back ({type(exc).__name__}: {exc})") \
            from None
    return restored, staged
