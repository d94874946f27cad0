"""Checkpoint files every agent shares: the file names, atomic ``.npz`` writes, the state file (metadata stamped
with its format, format version and the spacegraph version by `harness.execution.formats.stamp`, and read back
with the version checked first), model exports, and reading back the config, backend and spaces an agent
checkpoint was saved with. Each agent's own save/restore lives in its folder
(`reference_agents.agents.dqn.checkpoints`, `reference_agents.agents.impala.checkpoints`)."""

from __future__ import annotations

import os
from typing import Any, Callable

import numpy as np

from harness.execution.formats import stamp
from harness.execution.serialization import BadFileError, atomic_file, fields, read_npz, write_stamped_npz

#: The member of an agent ``.npz`` (state file, model export, shard snapshot) holding its JSON metadata.
META_MEMBER = "__meta__"
CHECKPOINT_WEIGHTS = "agent_variables.npz"
CHECKPOINT_STATE = "agent_state.npz"
CHECKPOINT_REPLAY = "agent_replay.npz"


def atomic_savez(path: str, arrays: dict[str, np.ndarray]) -> None:
    """Writes an ``.npz`` beside ``path`` and renames it into place (an error never leaves half a file)."""
    with atomic_file(path, suffix=".npz") as fh:
        np.savez(fh, **arrays)


def build_saved_agent(cls: type, directory: str, backend: str | None,
                      config_changes: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> Any:
    """``cls`` built from the config and spaces saved in ``directory`` (on ``backend`` or the saved one), restored.

    Args:
        config_changes: ``fn(saved config) -> config`` the agent is built from instead (a resume with another
            ``execution.strategy``: `reference_agents.training.replicas.with_replicas`).

    Raises:
        BadFileError: naming the checkpoint file that is missing, damaged or does not fit (a saved config that
            does not check names ``agent_state.npz``); the agent built is closed then (`close_agent`: no replica
            process is left).
    """
    from reference_agents.agents.base import close_agent
    from reference_agents.agents.config import ConfigError

    where = f"{cls.__name__}.load_checkpoint"
    config, saved_backend, state_space, action_space = saved_agent(directory, where)
    if config_changes is not None:
        config = config_changes(config)
    try:
        agent = cls(config, backend=backend or saved_backend, state_space=state_space, action_space=action_space)
    except ConfigError as exc:
        raise BadFileError(os.path.join(directory, CHECKPOINT_STATE), f"holds a config that does not check: {exc}",
                           f"{where}: {directory} holds no readable agent checkpoint") from None
    try:
        agent.restore(directory)
    except BaseException:
        close_agent(agent)
        raise
    return agent


def write_meta_npz(path: str, meta: dict[str, Any], arrays: dict[str, np.ndarray] | None = None) -> str:
    """Writes ``arrays`` and ``meta`` (stamped: its ``format`` with the format version and the spacegraph
    version, `harness.execution.formats.stamp`) as the member ``__meta__`` of an ``.npz`` at ``path``, atomically.
    Returns the path.

    Raises:
        ValueError: when ``meta`` has no ``format`` string.
    """
    if not isinstance(meta.get("format"), str):
        raise ValueError(f"write_meta_npz: meta needs a 'format' string; got keys {sorted(meta)}")
    stamped = stamp(meta["format"], {k: v for k, v in meta.items() if k != "format"})
    return write_stamped_npz(path, stamped, arrays or {}, META_MEMBER)


def write_agent_state(directory: str, meta: dict[str, Any], arrays: dict[str, np.ndarray] | None = None) -> str:
    """Writes a checkpoint's ``agent_state.npz`` atomically: ``meta`` (JSON: ``format`` and ``config`` at least, so
    `reference_agents.agents.load_checkpoint` finds the agent; stamped with the format version and the spacegraph
    version) and ``arrays``. Returns the file's path."""
    if not isinstance(meta.get("format"), str) or not isinstance(meta.get("config"), dict):
        raise ValueError(f"write_agent_state: meta needs a 'format' string and a 'config' dict; got keys {sorted(meta)}")
    return write_meta_npz(os.path.join(directory, CHECKPOINT_STATE), meta, arrays)


def read_agent_state(directory: str, formats: str | tuple[str, ...] | None = None) -> tuple[dict[str, Any], dict]:
    """The metadata and arrays of a checkpoint's ``agent_state.npz``, at the current version of its format (an
    older one migrated; `read_npz`: `BadFileError` naming it, also for a format version not read here)."""
    return read_npz(os.path.join(directory, CHECKPOINT_STATE), "an agent checkpoint's state file",
                    meta_key=META_MEMBER, formats=formats)


def export_agent_model(agent: Any, path: str | os.PathLike, model_format: str) -> str:
    """Writes ``agent``'s policy weights (``get_weights()``) and config to ``path`` (``.npz`` added when missing) as
    a model file of ``model_format``: config, backend, state space and number of actions in its stamped
    metadata. Returns the path."""
    path = os.fspath(path)
    path = path if path.endswith(".npz") else path + ".npz"
    meta = {"format": model_format, "config": agent.config.model_dump(by_alias=True), "backend": agent.backend,
            "state_space": repr(agent.state_space), "num_actions": agent.num_actions}
    return write_meta_npz(path, meta, {f"w:{k}": v for k, v in agent.get_weights().items()})


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
