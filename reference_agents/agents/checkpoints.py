"""Checkpoint files every agent shares: the file names, atomic ``.npz`` writes, and reading back the config,
backend and spaces an agent checkpoint was saved with. Each agent's own save/restore lives in its folder
(`reference_agents.agents.dqn.checkpoints`, `reference_agents.agents.impala.checkpoints`)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from harness.execution.serialization import BadFileError, atomic_file, fields, read_npz

CHECKPOINT_WEIGHTS = "agent_variables.npz"
CHECKPOINT_STATE = "agent_state.npz"
CHECKPOINT_REPLAY = "agent_replay.npz"


def atomic_savez(path: str, arrays: dict[str, np.ndarray]) -> None:
    """Writes an ``.npz`` beside ``path`` and renames it into place (an error never leaves half a file)."""
    with atomic_file(path, suffix=".npz") as fh:
        np.savez(fh, **arrays)


def build_saved_agent(cls: type, directory: str, backend: str | None) -> Any:
    """``cls`` built from the config and spaces saved in ``directory`` (on ``backend`` or the saved one), restored.

    Raises:
        BadFileError: naming the checkpoint file that is missing, damaged or does not fit (a saved config that
            does not check names ``agent_state.npz``).
    """
    from reference_agents.agents.config import ConfigError

    where = f"{cls.__name__}.load_checkpoint"
    config, saved_backend, state_space, action_space = saved_agent(directory, where)
    try:
        agent = cls(config, backend=backend or saved_backend, state_space=state_space, action_space=action_space)
    except ConfigError as exc:
        raise BadFileError(os.path.join(directory, CHECKPOINT_STATE), f"holds a config that does not check: {exc}",
                           f"{where}: {directory} holds no readable agent checkpoint") from None
    agent.restore(directory)
    return agent


def write_agent_state(directory: str, meta: dict[str, Any], arrays: dict[str, np.ndarray] | None = None) -> str:
    """Writes a checkpoint's ``agent_state.npz`` atomically: ``meta`` (JSON: ``format`` and ``config`` at least, so
    `reference_agents.agents.load_checkpoint` finds the agent) and ``arrays``. Returns the file's path."""
    import json

    if not isinstance(meta.get("format"), str) or not isinstance(meta.get("config"), dict):
        raise ValueError(f"write_agent_state: meta needs a 'format' string and a 'config' dict; got keys {sorted(meta)}")
    path = os.path.join(directory, CHECKPOINT_STATE)
    atomic_savez(path, {"__meta__": np.array(json.dumps(meta)), **(arrays or {})})
    return path


def read_agent_state(directory: str, formats: str | tuple[str, ...] | None = None) -> tuple[dict[str, Any], dict]:
    """The metadata and arrays of a checkpoint's ``agent_state.npz`` (`read_npz`: `BadFileError` naming it)."""
    return read_npz(os.path.join(directory, CHECKPOINT_STATE), "an agent checkpoint's state file",
                    meta_key="__meta__", formats=formats)


def saved_agent(directory: str, where: str) -> tuple[dict[str, Any], str, Any, Any]:
    """The config, backend and state and action spaces an agent checkpoint was saved with (the spaces parsed).

    Raises:
        BadFileError: naming ``agent_state.npz`` when it is missing, damaged or lacks one of them.
    """
    from harness.spaces import parse

    path = os.path.join(directory, CHECKPOINT_STATE)
    where = f"{where}: {directory} holds no readable agent checkpoint"
    try:
        meta, _ = read_agent_state(directory)
        config, backend, state_text, action_text = fields(path, meta, config=dict, backend=str, state_space=str,
                                                          action_space=str)
        try:
            state_space, action_space = parse(state_text), parse(action_text)
        except ValueError as exc:
            raise BadFileError(path, f"has spaces that do not parse: {exc}") from None
    except BadFileError as exc:
        raise exc.within(where) from None
    return config, backend, state_space, action_space
