"""Checkpoints of a training run: ``out_dir/checkpoint`` with the agent's checkpoint, ``worker.json`` and
``trainer.json``, replaced atomically by renames; reading them back for a resume."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import Any, Callable

from reference_agents.workers import VectorEnvWorker

CHECKPOINT = "checkpoint"
WORKER_STATE, TRAINER_STATE = "worker.json", "trainer.json"
_STATE_FORMAT = "spacegraph-trainer"


def read_trainer_state(directory: str | os.PathLike) -> dict[str, Any]:
    """The trainer state saved in a run directory's checkpoint (counters, settings, backend, history).

    Raises:
        ValueError: naming the directory when it holds no readable trainer state.
    """
    ckpt = _checkpoint_dir(os.fspath(directory))
    path = os.path.join(ckpt, TRAINER_STATE)
    try:
        with open(path) as fh:
            state = json.load(fh)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{os.fspath(directory)} holds no readable training checkpoint ({CHECKPOINT}/"
                         f"{TRAINER_STATE}): {exc}") from None
    if not isinstance(state, dict) or state.get("format") != _STATE_FORMAT:
        raise ValueError(f"{path} is not a trainer state (format "
                         f"{state.get('format') if isinstance(state, dict) else None!r})")
    return state


def _checkpoint_dir(directory: str) -> str:
    ckpt = os.path.join(directory, CHECKPOINT)
    if not os.path.isdir(ckpt) and os.path.isdir(ckpt + ".old"):
        ckpt += ".old"  # a save was cut between its two renames
    return ckpt


def read_worker_state(directory: str) -> dict[str, Any]:
    """The worker state saved in a run directory's checkpoint (its counters).

    Raises:
        ValueError: naming the directory when it holds no readable worker state.
    """
    try:
        with open(os.path.join(_checkpoint_dir(directory), WORKER_STATE)) as fh:
            return json.load(fh)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{directory} holds no readable worker state ({CHECKPOINT}/"
                         f"{WORKER_STATE}): {exc}") from None


def write_checkpoint(out_dir: str, agent: Any, worker: Any, trainer: Any) -> str:
    """Writes ``out_dir/checkpoint``: ``agent.save_checkpoint``, ``worker.state_dict()`` as ``worker.json``
    and ``trainer.state_dict()`` as ``trainer.json``.

    The checkpoint is written into a temporary directory that then replaces the previous
    one by renames, so an interrupted save leaves the previous checkpoint whole (under
    ``checkpoint`` or, between the two renames, ``checkpoint.old``).

    Returns:
        The checkpoint directory.
    """
    final = os.path.join(out_dir, CHECKPOINT)
    old = final + ".old"
    tmp = tempfile.mkdtemp(prefix=".checkpoint-", dir=out_dir)
    try:
        agent.save_checkpoint(tmp)
        with open(os.path.join(tmp, WORKER_STATE), "w") as fh:
            json.dump(worker.state_dict(), fh)
        with open(os.path.join(tmp, TRAINER_STATE), "w") as fh:
            json.dump(trainer.state_dict(), fh, indent=1)
        if os.path.exists(old):
            shutil.rmtree(old)
        if os.path.exists(final):
            os.rename(final, old)
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)
    return final


def load_run(directory: str, backend: str | None, agent_loader: Callable[[str, str | None], Any] | None,
             kwargs: dict[str, Any], worker_factory: Callable[[Any], Any] | None = None
             ) -> tuple[str, dict[str, Any], Any, VectorEnvWorker, dict[str, Any]]:
    """What `Trainer.resume` continues from: the checkpoint directory, the trainer state, the agent rebuilt
    from the checkpoint, a worker (``worker_factory(agent)``, default `VectorEnvWorker.for_agent`) with its
    counters restored, and the `Trainer` settings (the saved ones, overridden by ``kwargs``).

    Raises:
        ValueError: naming the directory and what is missing or inconsistent.
    """
    ckpt = _checkpoint_dir(directory)
    try:
        state = read_trainer_state(directory)
    except ValueError as exc:
        raise ValueError(f"Trainer.resume: {exc}") from None
    try:
        worker_state = read_worker_state(directory)
    except ValueError as exc:
        raise ValueError(f"Trainer.resume: {exc}") from None
    if agent_loader is None:
        from reference_agents.agents import load_checkpoint

        agent_loader = load_checkpoint  # DQN or IMPALA, by the checkpoint's format
    agent = agent_loader(ckpt, backend)
    settings = {k: state.get(k) for k in ("eval_every", "eval_episodes", "eval_envs", "target_return",
                                          "checkpoint_every")}
    if isinstance(state.get("evaluation"), dict):  # the whole protocol (checkpoints before it: the keys above)
        settings["evaluation"] = state["evaluation"]
    settings.update({k: v for k, v in kwargs.items() if v is not None or k not in settings})
    if "worker" in settings:
        raise ValueError("Trainer.resume: the worker is made for the restored agent; do not pass one")
    worker = (worker_factory or VectorEnvWorker.for_agent)(agent)
    if worker_state.get("num_envs", worker.num_envs) != worker.num_envs:
        raise ValueError(f"Trainer.resume: {directory} was trained with {worker_state.get('num_envs')} "
                         f"environments; this worker has {worker.num_envs}")
    worker.load_state_dict(worker_state)
    timesteps = getattr(agent, "timesteps", None)
    if not worker.folds and timesteps is not None and timesteps != worker.total_steps:
        raise ValueError(f"Trainer.resume: {ckpt} is inconsistent: the agent observed {timesteps} env steps, "
                         f"the worker counted {worker.total_steps}")
    return ckpt, state, agent, worker, settings
