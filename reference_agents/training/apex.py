"""Distributed training behind ``spacegraph train --executor ray|local``: `ApexTrainer` (the `Trainer` over an
`ApexDriver`, with the shards' snapshots in its checkpoints) and `make_actor_executor`."""

from __future__ import annotations

import json
import os
from typing import Any

from harness.execution.actors import ActorExecutor, InProcessActorExecutor
from harness.execution.formats import declare_format, stamp
from harness.execution.serialization import BadFileError, fields, read_json, verify_npz
from reference_agents.agents.apex import ApexDriver
from reference_agents.agents.apex.books import SHARD_FILE
from reference_agents.agents.config import ConfigError

from .checkpoints import (
    WORKER_STATE, checkpoint_dirs, checkpoint_trainer_state, checkpoint_worker_state, load_newest, saved_settings,
    saved_strategy)
from .replicas import check_resume_replicas, replica_strategy, with_replicas
from .scalars import apex_scalars
from .trainer import Trainer

EXECUTORS = ("local", "ray")
APEX_STATE = "apex.json"
APEX_STATE_FORMAT = "spacegraph-apex-state"
# Format 1: what spacegraph wrote before formats carried versions (then without a format key: read as format 1).
declare_format(APEX_STATE_FORMAT, 1, "an Ape-X checkpoint state")
SHARDS_DIR = "shards"


def make_actor_executor(kind: str, address: str | None = None, num_cpus: int | None = None,
                        object_store_memory: int | None = None) -> ActorExecutor:
    """The actor executor ``kind`` names: ``local`` (every actor in this process) or ``ray`` (a Ray actor each;
    a local Ray instance on 127.0.0.1 with token authentication and a token of its own, or the cluster at
    ``address``, its token given as `RayActorExecutor` says).

    Raises:
        ValueError: for another kind, or an ``address`` without Ray.
    """
    if kind == "local":
        if address is not None:
            raise ValueError("--address joins a Ray cluster: use it with --executor ray")
        return InProcessActorExecutor()
    if kind == "ray":
        from harness.execution.ray import RayActorExecutor

        kwargs: dict[str, Any] = {"address": address, "num_cpus": num_cpus}
        if object_store_memory is not None:
            kwargs["object_store_memory"] = object_store_memory
        return RayActorExecutor(**kwargs)
    raise ValueError(f"executor must be one of {EXECUTORS}; got {kind!r}")


def saved_executor_kind(directory: str | os.PathLike) -> str | None:
    """The executor kind (``ray`` or ``local``) an Ape-X run directory's newest readable checkpoint was written
    with (None: unknown)."""
    for ckpt in checkpoint_dirs(directory):
        try:
            name = str(read_json(os.path.join(ckpt, APEX_STATE)).get("executor") or "")
        except BadFileError:
            continue
        return "ray" if "Ray" in name else "local" if name else None
    return None


class ApexTrainer(Trainer):
    """`Trainer` over an `ApexDriver`: the same evaluations, metrics files, learning curve and checkpoints.

    A checkpoint holds the learner agent's (``agent.save_checkpoint``), the driver's counters and ledger
    (``worker.json``), the trainer's state, the Ape-X config (``apex.json``) and one snapshot per shard
    (``shards/shard-J.npz``), so `resume` continues with the replay the shards held. Its TensorBoard scalars add
    the driver's replay ledger and failures at every evaluation (`apex_scalars`).

    Args:
        driver: the `ApexDriver` (not yet run, or restored by `resume`).
        out_dir: the run directory, as for `Trainer`.
        **kwargs: `Trainer` arguments (evaluation, checkpoint_every, max_seconds, progress, ...;
            ``worker_scalars`` defaults to `apex_scalars`).
    """

    def __init__(self, driver: ApexDriver, out_dir: str | os.PathLike | None = None, **kwargs: Any) -> None:
        self.driver = driver
        kwargs.setdefault("worker_scalars", apex_scalars)
        super().__init__(driver.agent, out_dir, worker=driver, **kwargs)

    def _write_checkpoint_extra(self, folder: str) -> None:
        """``apex.json`` and the shards' snapshots (``shards/shard-J.npz``), in the new checkpoint before it is
        moved into place."""
        shards = os.path.join(folder, SHARDS_DIR)
        os.makedirs(shards)
        if self.driver.started:
            self.driver.save_shards(os.path.abspath(shards))
        with open(os.path.join(folder, APEX_STATE), "w") as fh:
            json.dump(stamp(APEX_STATE_FORMAT, {
                "config": self.driver.config.model_dump(by_alias=True), "ledger": self.driver.ledger(False),
                "executor": type(self.driver.executor).__name__, "worker_failures": self.driver.worker_failures,
                "shard_failures": self.driver.shard_failures}), fh, indent=1, default=str)

    @classmethod
    def resume(cls, directory: str | os.PathLike, executor: ActorExecutor | None = None,  # type: ignore[override]
               backend: str | None = None, workers: int | None = None, replicas: int | None = None,
               replica_mode: str | None = None, **kwargs: Any) -> "ApexTrainer":
        """An `ApexTrainer` continuing the Ape-X run in ``directory``: the learner (weights, optimizer state,
        counters), the driver's counters and ledger, and each shard from its snapshot.

        Args:
            directory: a run directory `save_checkpoint` wrote into.
            executor: where the actors run (required).
            backend: rebuild on this backend (default: the saved one).
            workers: another number of workers (the shards stay as saved).
            replicas: the learner's update on this many replicas (`with_replicas` on the saved config; None: the
                saved strategy).
            replica_mode: ``processes`` or ``towers`` with ``replicas`` (None: the saved config's, else processes).
            **kwargs: `Trainer` arguments overriding the saved settings.

        When a file of the newest checkpoint is missing or damaged, the run continues from ``checkpoint.old``
        and ``stream`` (default stderr) says so (see `load_newest`).

        Raises:
            BadFileError: (a ValueError) naming the damaged files when no checkpoint loads.
            ValueError: naming the directory and what is missing or inconsistent.
        """
        directory = os.fspath(directory)
        if executor is None:
            raise ValueError("ApexTrainer.resume: give the executor the actors run on")
        if replicas is None and replica_mode is not None:
            raise ValueError("--replica-mode needs --replicas N")
        if replicas is not None:
            replica_strategy({}, replicas, replica_mode)  # the flags checked before a checkpoint is read
            check_resume_replicas(saved_strategy(directory), directory, replicas, replica_mode)

        def load(ckpt: str) -> tuple[dict[str, Any], ApexDriver]:
            apex_path = os.path.join(ckpt, APEX_STATE)
            saved = read_json(apex_path, "an Ape-X checkpoint state", formats=APEX_STATE_FORMAT,
                              assume_format=APEX_STATE_FORMAT)
            state, worker_state = checkpoint_trainer_state(ckpt), checkpoint_worker_state(ckpt)
            (shards,) = fields(os.path.join(ckpt, WORKER_STATE), worker_state, shards=int)
            for j in range(shards):  # each whole, before the shards (maybe Ray actors) load them
                verify_npz(os.path.join(ckpt, SHARDS_DIR, SHARD_FILE.format(j)))
            if not isinstance(saved.get("config"), dict):
                raise BadFileError(apex_path, "is not an Ape-X checkpoint state: it holds no config")
            config = saved["config"] if replicas is None else with_replicas(saved["config"], replicas, replica_mode)
            try:
                driver = ApexDriver(config, executor, backend=backend, workers=workers)
            except ConfigError as exc:
                raise BadFileError(apex_path, f"holds a config that does not check: {exc}") from None
            try:
                try:
                    driver.load_state_dict(worker_state)
                except (ValueError, KeyError, TypeError) as exc:
                    raise BadFileError(os.path.join(ckpt, WORKER_STATE), f"does not fit the driver: {exc}") from None
                driver.agent.restore(ckpt)
            except BaseException:
                driver.close()
                raise
            return state, driver

        ckpt, (state, driver), fell_back = load_newest(directory, load, "ApexTrainer.resume", kwargs.get("stream"))
        try:
            driver.start()
            driver.load_shards(os.path.abspath(os.path.join(ckpt, SHARDS_DIR)))
            trainer = cls(driver, None, **saved_settings(state, kwargs))
            trainer._restore_progress(directory, ckpt, state, driver.total_steps, fell_back)
        except BaseException:
            driver.close()  # (the learner's threads and replica processes; the executor is the caller's)
            raise
        return trainer

    def close(self) -> None:
        """Stops the driver's learner threads and ends the learner's replica processes (the executor is the
        caller's to shut down)."""
        self.driver.close()
