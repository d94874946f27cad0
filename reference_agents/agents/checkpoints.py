"""Model files and checkpoints of a `DQNAgent`: export/import of the Q-network, save/restore of everything."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import numpy as np

from harness.execution.serialization import atomic_file
from reference_agents.components.helpers import NStepAccumulator

CHECKPOINT_WEIGHTS = "agent_variables.npz"
CHECKPOINT_STATE = "agent_state.npz"
CHECKPOINT_REPLAY = "agent_replay.npz"


def _atomic_savez(path: str, arrays: dict[str, np.ndarray]) -> None:
    """Writes an ``.npz`` beside ``path`` and renames it into place (an error never leaves half a file)."""
    with atomic_file(path, suffix=".npz") as fh:
        np.savez(fh, **arrays)


class CheckpointMixin:
    """`export_model`/`import_model` (the Q-network and config) and `save_checkpoint`/`restore`/
    `load_checkpoint` (graph variables, host-side replay and the Python-side state)."""

    def export_model(self, path: str) -> str:
        """Writes the Q-network's weights and the config to ``path`` (``.npz``, atomically); returns the path."""
        path = os.fspath(path)
        if not path.endswith(".npz"):
            path += ".npz"
        meta = {"format": "spacegraph-dqn-model", "config": self.config.model_dump(by_alias=True),
                "backend": self.backend, "state_space": repr(self.state_space), "num_actions": self.num_actions}
        arrays = {"__meta__": np.array(json.dumps(meta))}
        arrays.update({f"w:{k}": v for k, v in self.get_weights().items()})
        _atomic_savez(path, arrays)
        return path

    def import_model(self, path: str) -> None:
        """Loads a file `export_model` wrote (from either backend) into the online and target networks.

        Raises:
            ValueError: naming the file and what does not fit; the agent is unchanged then.
        """
        try:
            with np.load(path, allow_pickle=False) as data:
                meta = json.loads(str(data["__meta__"]))
                weights = {k[2:]: data[k] for k in data.files if k.startswith("w:")}
        except (OSError, KeyError, ValueError) as exc:
            raise ValueError(f"DQNAgent.import_model: {path} is not a DQN model file: {exc}") from None
        if meta.get("format") != "spacegraph-dqn-model":
            raise ValueError(f"DQNAgent.import_model: {path} is not a DQN model file (format {meta.get('format')!r})")
        if meta.get("num_actions") != self.num_actions or meta.get("state_space") != repr(self.state_space):
            raise ValueError(f"DQNAgent.import_model: {path} is for states {meta.get('state_space')} and "
                             f"{meta.get('num_actions')} actions; this agent has {self.state_space!r} and "
                             f"{self.num_actions}")
        try:
            self.set_weights(weights)
        except ValueError as exc:
            raise ValueError(f"DQNAgent.import_model: {path}: {exc}") from None

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
        _atomic_savez(os.path.join(directory, CHECKPOINT_WEIGHTS),
                      {f"w:{k}": v for k, v in self.executor.get_weights().items()})
        _atomic_savez(os.path.join(directory, CHECKPOINT_REPLAY), self.replay.state_dict())
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
        meta = {"format": "spacegraph-dqn-checkpoint", "config": self.config.model_dump(by_alias=True),
                "backend": self.backend, "state_space": repr(self.state_space),
                "action_space": repr(self.action_space), "saved_at": time.time(),
                "timesteps": state["timesteps"], "updates": state["updates"],
                "updates_due_at": state["updates_due_at"], "accumulators": state["accumulators"]}
        _atomic_savez(os.path.join(directory, CHECKPOINT_STATE), {"__meta__": np.array(json.dumps(meta)), **windows})
        return directory

    def restore(self, directory: str) -> None:
        """Loads a checkpoint `save_checkpoint` wrote (either backend) into this agent.

        Environment states are not part of a checkpoint, so the episodes in progress when it was
        saved cannot continue: their open n-step windows are closed as cut short (bootstrapping
        from the last observed state with ``gamma^k``, like a time limit) and staged for replay.

        Raises:
            ValueError: naming the directory and what is missing or does not fit; nothing changes then.
        """
        weights_path = os.path.join(directory, CHECKPOINT_WEIGHTS)
        state_path = os.path.join(directory, CHECKPOINT_STATE)
        try:
            with np.load(state_path, allow_pickle=False) as data:
                meta = json.loads(str(data["__meta__"]))
                arrays = {k: data[k] for k in data.files if k != "__meta__"}
            with np.load(weights_path, allow_pickle=False) as data:
                weights = {k[2:]: data[k] for k in data.files if k.startswith("w:")}
        except (OSError, KeyError, ValueError) as exc:
            raise ValueError(f"DQNAgent.restore: {directory} holds no readable agent checkpoint: {exc}") from None
        if meta.get("state_space") != repr(self.state_space) or meta.get("action_space") != repr(self.action_space):
            raise ValueError(f"DQNAgent.restore: {directory} is for states {meta.get('state_space')} and actions "
                             f"{meta.get('action_space')}; this agent has {self.state_space!r} and "
                             f"{self.action_space!r}")
        replay_path = os.path.join(directory, CHECKPOINT_REPLAY)
        try:
            with np.load(replay_path, allow_pickle=False) as data:
                replay = {k: data[k] for k in data.files}
        except (OSError, ValueError) as exc:
            raise ValueError(f"DQNAgent.restore: {directory} holds no readable replay file: {exc}") from None
        try:
            self.executor.set_weights(weights)
            if replay or self.replay.state_dict():
                self.replay.load_state_dict(replay)
        except (ValueError, KeyError) as exc:
            raise ValueError(f"DQNAgent.restore: {directory}: {exc} (was it saved with another config?)") from None
        self.timesteps, self.updates = int(meta["timesteps"]), int(meta["updates"])
        self._updates_due_at = int(meta["updates_due_at"])
        self._accumulators = {}
        self._staged = []
        for env, acc in meta["accumulators"].items():
            steps = [(arrays[f"s:{env}:{j}"], arrays[f"a:{env}:{j}"].item(), float(arrays[f"r:{env}:{j}"]))
                     for j in range(acc["steps"])]
            restored = NStepAccumulator(acc["n"], acc["gamma"])
            restored.load_state_dict({"n": acc["n"], "gamma": acc["gamma"], "steps": steps,
                                      "last_next_state": arrays.get(f"next:{env}")})
            self._staged += restored.flush()
            self._accumulators[int(env)] = restored

    @classmethod
    def load_checkpoint(cls, directory: str, backend: str | None = None) -> "CheckpointMixin":
        """A new agent built from the config saved in ``directory`` (on ``backend`` or the saved one), restored."""
        try:
            with np.load(os.path.join(directory, CHECKPOINT_STATE), allow_pickle=False) as data:
                meta = json.loads(str(data["__meta__"]))
        except (OSError, KeyError, ValueError) as exc:
            raise ValueError(f"DQNAgent.load_checkpoint: {directory} holds no readable agent checkpoint: "
                             f"{exc}") from None
        agent = cls(meta["config"], backend=backend or meta["backend"], state_space=meta["state_space"],
                    action_space=meta["action_space"])
        agent.restore(directory)
        return agent
