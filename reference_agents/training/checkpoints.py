"""Checkpoints of a training run: ``out_dir/checkpoint`` with the agent's checkpoint, ``worker.json`` and
``trainer.json``, and the one before it, ``out_dir/checkpoint.old``; writing them so that a whole checkpoint is
always on disk, and reading them back for a resume, falling back to ``checkpoint.old`` when the newest is damaged.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import zipfile
from typing import Any, Callable, TextIO, TypeVar

from harness.execution.formats import declare_format
from harness.execution.serialization import (READ_ERRORS, BadFileError, FormatVersionError, check_out_dir, fields,
                                             read_json)
from reference_agents.agents.base import close_agent
from reference_agents.workers import VectorEnvWorker

from .evaluation import EvaluationProtocol
from .files import METRICS_CSV

CHECKPOINT = "checkpoint"
OLD_CHECKPOINT = CHECKPOINT + ".old"
WORKER_STATE, TRAINER_STATE = "worker.json", "trainer.json"
TRAINER_STATE_FORMAT = "spacegraph-trainer"
# Format 1: what spacegraph wrote before formats carried versions (its "version": 1 was that, unchecked).
declare_format(TRAINER_STATE_FORMAT, 1, "a trainer state")
#: The prefix of the folders a save works in (a new checkpoint being written, or the ones it replaces).
_WORK_PREFIX = ".checkpoint-"

T = TypeVar("T")


def checkpoint_dirs(directory: str | os.PathLike) -> list[str]:
    """A run directory's checkpoint folders, newest first: ``checkpoint`` and ``checkpoint.old``, where present."""
    base = os.path.join(os.fspath(directory), CHECKPOINT)
    return [d for d in (base, base + ".old") if os.path.isdir(d)]


def _no_checkpoint(directory: str) -> BadFileError:
    folder = os.fspath(directory)
    why = "is no folder" if not os.path.isdir(folder) else f"has neither {CHECKPOINT}/ nor {OLD_CHECKPOINT}/ in it"
    return BadFileError(folder, why, f"{folder} holds no readable training checkpoint ({CHECKPOINT}/{TRAINER_STATE})")


def _newest_readable(directory: str | os.PathLike, read: Callable[[str], T], name: str) -> T:
    """``read(folder)`` of the newest checkpoint folder where it succeeds (quietly: `load_newest` reports).

    Raises:
        BadFileError: naming every file that failed (``name`` in each folder) when it fails everywhere.
    """
    directory = os.fspath(directory)
    errors = []
    for ckpt in checkpoint_dirs(directory):
        try:
            return read(ckpt)
        except FormatVersionError as exc:  # whole, of a format not read here: the older one is no way out
            raise exc.within(f"{directory} holds a training checkpoint this spacegraph does not read") from None
        except BadFileError as exc:
            errors.append(exc)
    if not errors:
        raise _no_checkpoint(directory)
    where = f"{directory} holds no readable training checkpoint ({CHECKPOINT}/{name})"
    if len(errors) == 1:
        raise BadFileError(errors[0].path, errors[0].problem, where)
    raise BadFileError(errors[0].path, errors[0].problem + f"; and {errors[1].path} {errors[1].problem}", where)


def read_trainer_state(directory: str | os.PathLike) -> dict[str, Any]:
    """The trainer state saved in a run directory's newest readable checkpoint (counters, settings, backend,
    history): ``checkpoint/trainer.json``, else ``checkpoint.old/trainer.json``.

    Raises:
        BadFileError: (a ValueError) naming the files when no checkpoint holds a readable trainer state.
    """
    return _newest_readable(directory, checkpoint_trainer_state, TRAINER_STATE)


def saved_strategy(directory: str | os.PathLike) -> dict[str, Any] | None:
    """The strategy record (`strategy_record`) the newest readable trainer state of a run directory holds (None:
    none readable, or saved before runs recorded it)."""
    try:
        return read_trainer_state(directory).get("strategy")
    except BadFileError:
        return None


#: The types of a trainer state's keys (each may also be null).
_TRAINER_STATE_TYPES = {"total_steps_target": int, "wall_seconds": float, "train_seconds": float,
                        "solved_at_step": int, "backend": str, "eval_every": int, "eval_episodes": int,
                        "eval_envs": int, "target_return": float, "checkpoint_every": int, "evaluation": dict,
                        "strategy": dict}


def checkpoint_trainer_state(ckpt: str) -> dict[str, Any]:
    """A checkpoint's ``trainer.json``, its keys' types and its evaluation protocol checked.

    Raises:
        BadFileError: naming the file and what is wrong.
    """
    path = os.path.join(ckpt, TRAINER_STATE)
    state = read_json(path, "a trainer state", formats=TRAINER_STATE_FORMAT)
    (history,) = fields(path, state, history=list)
    for key, kind in _TRAINER_STATE_TYPES.items():
        if state.get(key) is not None:
            fields(path, state, **{key: kind})
    for i, row in enumerate(history):  # (checkpoints of older versions may lack later columns)
        if not isinstance(row, dict) or not isinstance(row.get("env_steps"), int) or not all(
                v is None or isinstance(v, (int, float)) and not isinstance(v, bool) for v in row.values()):
            raise BadFileError(path, f"has a history row ({i}) that is not an object of metric columns (an int "
                                     f"env_steps, numbers or nulls)")
    if state.get("evaluation") is not None:
        try:
            EvaluationProtocol.from_config(state["evaluation"])
        except (TypeError, ValueError) as exc:
            raise BadFileError(path, f"holds an evaluation protocol that does not check: {exc}") from None
    return state


def checkpoint_worker_state(ckpt: str) -> dict[str, Any]:
    """A checkpoint's ``worker.json``, its counters' types checked.

    Raises:
        BadFileError: naming the file and what is wrong.
    """
    path = os.path.join(ckpt, WORKER_STATE)
    state = read_json(path, "a worker state")
    fields(path, state, total_steps=int, total_frames=int, total_updates=int, episodes=list)
    return state


def _saved_steps(ckpt: str) -> int | None:
    """The env steps a checkpoint's worker had taken (None when unreadable)."""
    try:
        steps = checkpoint_worker_state(ckpt).get("total_steps")
    except BadFileError:
        return None
    return steps if isinstance(steps, int) and not isinstance(steps, bool) else None


def load_newest(directory: str, load: Callable[[str], T], where: str = "Trainer.resume",
                stream: TextIO | None = None) -> tuple[str, T, bool]:
    """``load(folder)`` of a run's newest checkpoint that loads: ``checkpoint``, else ``checkpoint.old``.

    A checkpoint whose files are missing or damaged (``load`` raises `BadFileError`) is passed over for the
    older one, and ``stream`` (default stderr) is told which file was damaged, that the older checkpoint is
    used and how many env steps it is behind. A whole file of a format version not read here
    (`FormatVersionError`) is no damage: it is raised at once. Nothing in the run directory changes.

    Returns:
        ``(the folder loaded, load's result, whether the newest checkpoint was passed over)``.

    Raises:
        BadFileError: (a ValueError) naming every damaged file when no checkpoint loads.
        FormatVersionError: (a BadFileError) naming the file of a format version this code does not read.
    """
    directory = os.fspath(directory)
    folders = checkpoint_dirs(directory)
    if not folders:
        raise _no_checkpoint(directory).within(where)
    newest = os.path.join(directory, CHECKPOINT)
    errors: list[BadFileError] = []
    for ckpt in folders:
        try:
            result = load(ckpt)
        except FormatVersionError as exc:  # whole, of a format not read here: not damage, so no fall-back
            raise exc.within(f"{where}: {directory} holds a checkpoint this spacegraph does not read") from None
        except BadFileError as exc:
            errors.append(exc)
            continue
        if ckpt != newest:
            _tell_fallback(directory, ckpt, errors, stream)
        return ckpt, result, ckpt != newest
    if len(errors) == 1:  # (the file and what is wrong with it: who read it for what is said here)
        raise BadFileError(errors[0].path, errors[0].problem,
                           f"{where}: {directory} holds no readable training checkpoint") from None
    raise BadFileError(directory, "holds no readable training checkpoint: both are damaged: "
                                  + "; and ".join(f"{e.path} {e.problem}" for e in errors), where) from None


def _tell_fallback(directory: str, older: str, errors: list[BadFileError], stream: TextIO | None) -> None:
    newest = os.path.join(directory, CHECKPOINT)
    if errors:
        what = f"{errors[0].path} {errors[0].problem}"
        old_steps, new_steps = _saved_steps(older), _saved_steps(newest)
        if old_steps is not None and new_steps is not None:
            behind = f"{new_steps - old_steps:,} env steps behind it (at {old_steps:,})"
        else:
            behind = "behind it by an unknown number of env steps" + (
                f" (at {old_steps:,})" if old_steps is not None else "")
        note = (f"the damaged {CHECKPOINT}/ is replaced at the next save; {OLD_CHECKPOINT}/ is kept until a "
                f"new checkpoint is whole")
    else:
        what = f"{newest} is missing (a save was cut short)"
        behind = "the last one saved"
        note = f"{OLD_CHECKPOINT}/ is kept until a new checkpoint is whole"
    (stream or sys.stderr).write(f"warning: {what}\n  resuming from the older checkpoint {older}, {behind}; "
                                 f"{note}\n")
    (stream or sys.stderr).flush()


def looks_whole(ckpt: str, names: list[str]) -> bool:
    """A quick check that the checkpoint folder ``ckpt`` has every file in ``names`` (paths inside it), that its
    JSON files read and its ``.npz`` archives open (their member directories only: arrays are not read)."""
    for name in names:
        path = os.path.join(ckpt, name)
        try:
            if name.endswith(".json"):
                read_json(path)
            elif name.endswith(".npz"):
                with zipfile.ZipFile(path):
                    pass
            elif not os.path.isfile(path):
                return False
        except (BadFileError, *READ_ERRORS):
            return False
    return True


def _files(folder: str) -> list[str]:
    return sorted(os.path.relpath(os.path.join(root, f), folder) for root, _, files in os.walk(folder) for f in files)


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync(folder: str) -> None:
    """Flushes every file under ``folder`` (and the folders) to the disk, so that a rename publishes whole files."""
    for root, _, files in os.walk(folder):
        for name in files:
            _fsync(os.path.join(root, name))
        _fsync(root)


def write_checkpoint(out_dir: str, agent: Any, worker: Any, trainer: Any,
                     extra: Callable[[str], None] | None = None, current_ok: bool | None = None) -> str:
    """Writes ``out_dir/checkpoint``: ``agent.save_checkpoint``, ``worker.state_dict()`` as ``worker.json``,
    ``trainer.state_dict()`` as ``trainer.json`` and whatever ``extra(folder)`` adds.

    The new checkpoint is written whole into a temporary folder and flushed to disk before any existing one
    is touched. Then, when the current ``checkpoint`` is whole, it becomes ``checkpoint.old`` (replacing the
    one before); when it is missing or damaged, it is dropped and ``checkpoint.old`` stays. Each step is a
    rename: at every moment a whole checkpoint is on disk, and the only good one is never deleted.

    Args:
        extra: ``fn(folder)``: writes more files into the new checkpoint folder before it is moved into place.
        current_ok: whether the current ``checkpoint`` is whole (None: `looks_whole`; a trainer that resumed
            from ``checkpoint.old`` passes False).

    Returns:
        The checkpoint directory.
    """
    final, old = os.path.join(out_dir, CHECKPOINT), os.path.join(out_dir, OLD_CHECKPOINT)
    for leftover in os.listdir(out_dir):  # the work folders of saves cut short (never a checkpoint of its own)
        if leftover.startswith(_WORK_PREFIX) and os.path.isdir(os.path.join(out_dir, leftover)):
            shutil.rmtree(os.path.join(out_dir, leftover), ignore_errors=True)
    tmp = tempfile.mkdtemp(prefix=_WORK_PREFIX, dir=out_dir)
    trash = None
    try:
        agent.save_checkpoint(tmp)
        with open(os.path.join(tmp, WORKER_STATE), "w") as fh:
            json.dump(worker.state_dict(), fh)
        with open(os.path.join(tmp, TRAINER_STATE), "w") as fh:
            json.dump(trainer.state_dict(), fh, indent=1)
        if extra is not None:
            extra(tmp)
        _sync(tmp)
        if os.path.isdir(final):
            whole = looks_whole(final, _files(tmp)) if current_ok is None else current_ok
            trash = tempfile.mkdtemp(prefix=_WORK_PREFIX + "replaced-", dir=out_dir)
            if whole:
                if os.path.isdir(old):
                    os.rename(old, os.path.join(trash, OLD_CHECKPOINT))
                os.rename(final, old)  # (between these renames checkpoint.old is the newest whole checkpoint)
            else:
                os.rename(final, os.path.join(trash, CHECKPOINT))
        os.rename(tmp, final)
        _fsync(out_dir)  # (the renames themselves)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if trash is not None:
        shutil.rmtree(trash, ignore_errors=True)
    return final


def make_run_dir(out_dir: str) -> None:
    """Makes a new run directory, checked first: a folder that is (or can be made) writable and holds no run.

    Raises:
        ValueError: naming the folder and what is wrong (a file in the way, not writable, a run in it already).
    """
    check_out_dir(out_dir, "Trainer: out_dir")
    if any(os.path.exists(os.path.join(out_dir, f)) for f in (CHECKPOINT, OLD_CHECKPOINT, METRICS_CSV)):
        raise ValueError(f"Trainer: {out_dir} already holds a run (a checkpoint or metrics.csv); continue it with "
                         f"Trainer.resume (spacegraph train --resume DIR) or choose another out_dir")
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"Trainer: out_dir {out_dir} cannot be made: {exc}") from None


def load_run(directory: str, backend: str | None, agent_loader: Callable[[str, str | None], Any] | None,
             kwargs: dict[str, Any], worker_factory: Callable[[Any], Any] | None = None,
             stream: TextIO | None = None) -> tuple[str, dict[str, Any], Any, VectorEnvWorker, dict[str, Any], bool]:
    """What `Trainer.resume` continues from: the checkpoint directory, the trainer state, the agent rebuilt
    from the checkpoint, a worker (``worker_factory(agent)``, default `VectorEnvWorker.for_agent`) with its
    counters restored, the `Trainer` settings (the saved ones, overridden by ``kwargs``), and whether the newest
    checkpoint was damaged (then ``checkpoint.old`` is used, see `load_newest`; ``stream`` is told).

    Raises:
        BadFileError: (a ValueError) naming the damaged files when no checkpoint loads.
        ValueError: naming the directory and what is inconsistent.
    """
    if agent_loader is None:
        from reference_agents.agents import load_checkpoint

        agent_loader = load_checkpoint  # DQN or IMPALA, by the checkpoint's format

    def load(ckpt: str) -> tuple[dict[str, Any], dict[str, Any], Any]:
        return checkpoint_trainer_state(ckpt), checkpoint_worker_state(ckpt), agent_loader(ckpt, backend)

    ckpt, (state, worker_state, agent), fell_back = load_newest(directory, load, "Trainer.resume", stream)
    settings = saved_settings(state, kwargs)
    try:
        if "worker" in settings:
            raise ValueError("Trainer.resume: the worker is made for the restored agent; do not pass one")
        worker = (worker_factory or VectorEnvWorker.for_agent)(agent)
    except BaseException:
        close_agent(agent)  # (its replica processes are not left running)
        raise
    try:
        restore_worker(ckpt, worker, worker_state, agent)
    except BaseException:
        try:
            getattr(worker, "close", lambda: None)()  # (a distributed worker's actors are not left running)
        finally:
            close_agent(agent)
        raise
    return ckpt, state, agent, worker, settings, fell_back


def restore_worker(ckpt: str, worker: Any, worker_state: dict[str, Any], agent: Any) -> None:
    """Loads a checkpoint's worker state into ``worker``, checked against it and against the restored ``agent``.

    Raises:
        BadFileError: naming ``worker.json`` when it does not fit the worker or disagrees with the agent.
    """
    path, where = os.path.join(ckpt, WORKER_STATE), "Trainer.resume"
    if worker_state.get("num_envs", worker.num_envs) != worker.num_envs:
        raise BadFileError(path, f"says the run had {worker_state.get('num_envs')!r} environments; the agent's "
                                 f"config gives this worker {worker.num_envs}", where)
    try:
        worker.load_state_dict(worker_state)
    except (ValueError, KeyError, TypeError) as exc:
        raise BadFileError(path, f"does not fit the worker: {type(exc).__name__}: {exc}", where) from None
    timesteps = getattr(agent, "timesteps", None)
    if not worker.folds and timesteps is not None and timesteps != worker.total_steps:
        raise BadFileError(path, f"counts {worker.total_steps} env steps, the agent's checkpoint {timesteps}: one "
                                 f"of them is damaged", where)


def saved_settings(state: dict[str, Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The `Trainer` settings a trainer state holds, overridden by the ``kwargs`` that are not None."""
    settings = {k: state.get(k) for k in ("eval_every", "eval_episodes", "eval_envs", "target_return",
                                          "checkpoint_every")}
    if isinstance(state.get("evaluation"), dict):  # the whole protocol (checkpoints before it: the keys above)
        settings["evaluation"] = state["evaluation"]
    settings.update({k: v for k, v in kwargs.items() if v is not None or k not in settings})
    return settings
