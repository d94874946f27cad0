"""Distributed training behind ``spacegraph train --executor ray|local``: `ApexTrainer` (the `Trainer` over an
`ApexDriver`, with the shards' snapshots in its checkpoints) and `make_actor_executor`."""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

from harness.execution.actors import ActorExecutor, InProcessActorExecutor
from reference_agents.agents.apex import ApexDriver

from .checkpoints import _checkpoint_dir, read_trainer_state, read_worker_state
from .trainer import Trainer

EXECUTORS = ("local", "ray")
APEX_STATE = "apex.json"
SHARDS_DIR = "shards"


def make_actor_executor(kind: str, address: str | None = None, num_cpus: int | None = None,
                        object_store_memory: int | None = None) -> ActorExecutor:
    """The actor executor ``kind`` names: ``local`` (every actor in this process) or ``ray`` (a Ray actor each;
    a local Ray instance on 127.0.0.1, or the cluster at ``address``).

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
    """The executor kind (``ray`` or ``local``) an Ape-X run directory's checkpoint was written with (None: unknown)."""
    try:
        with open(os.path.join(_checkpoint_dir(os.fspath(directory)), APEX_STATE)) as fh:
            name = json.load(fh).get("executor") or ""
    except (OSError, ValueError):
        return None
    return "ray" if "Ray" in name else "local" if name else None


class ApexTrainer(Trainer):
    """`Trainer` over an `ApexDriver`: the same evaluations, metrics files, learning curve and checkpoints.

    A checkpoint holds the learner agent's (``agent.save_checkpoint``), the driver's counters and ledger
    (``worker.json``), the trainer's state, the Ape-X config (``apex.json``) and one snapshot per shard
    (``shards/shard-J.npz``), so `resume` continues with the replay the shards held.

    Args:
        driver: the `ApexDriver` (not yet run, or restored by `resume`).
        out_dir: the run directory, as for `Trainer`.
        **kwargs: `Trainer` arguments (evaluation, checkpoint_every, max_seconds, progress, ...).
    """

    def __init__(self, driver: ApexDriver, out_dir: str | os.PathLike | None = None, **kwargs: Any) -> None:
        self.driver = driver
        super().__init__(driver.agent, out_dir, worker=driver, **kwargs)

    def save_checkpoint(self) -> str:
        """The `Trainer` checkpoint plus ``apex.json`` and the shards' snapshots (written before it, moved in)."""
        if self.out_dir is None:
            raise ValueError("ApexTrainer.save_checkpoint: this trainer has no out_dir")
        staging = os.path.join(self.out_dir, ".shards-staging")
        shutil.rmtree(staging, ignore_errors=True)
        os.makedirs(staging)
        if self.driver._started:
            self.driver.save_shards(os.path.abspath(staging))
        with open(os.path.join(staging, APEX_STATE), "w") as fh:
            json.dump({"config": self.driver.config.model_dump(by_alias=True), "ledger": self.driver.ledger(False),
                       "executor": type(self.driver.executor).__name__,
                       "worker_failures": self.driver.worker_failures,
                       "shard_failures": self.driver.shard_failures}, fh, indent=1, default=str)
        final = super().save_checkpoint()
        os.replace(os.path.join(staging, APEX_STATE), os.path.join(final, APEX_STATE))
        os.replace(staging, os.path.join(final, SHARDS_DIR))
        return final

    @classmethod
    def resume(cls, directory: str | os.PathLike, executor: ActorExecutor | None = None,  # type: ignore[override]
               backend: str | None = None, workers: int | None = None, **kwargs: Any) -> "ApexTrainer":
        """An `ApexTrainer` continuing the Ape-X run in ``directory``: the learner (weights, optimizer state,
        counters), the driver's counters and ledger, and each shard from its snapshot.

        Args:
            directory: a run directory `save_checkpoint` wrote into.
            executor: where the actors run (required).
            backend: rebuild on this backend (default: the saved one).
            workers: another number of workers (the shards stay as saved).
            **kwargs: `Trainer` arguments overriding the saved settings.

        Raises:
            ValueError: naming the directory and what is missing or inconsistent.
        """
        directory = os.fspath(directory)
        if executor is None:
            raise ValueError("ApexTrainer.resume: give the executor the actors run on")
        ckpt = _checkpoint_dir(directory)
        try:
            with open(os.path.join(ckpt, APEX_STATE)) as fh:
                saved = json.load(fh)
        except (OSError, ValueError) as exc:
            raise ValueError(f"ApexTrainer.resume: {directory} holds no Ape-X checkpoint ({APEX_STATE}): "
                             f"{exc}") from None
        state = read_trainer_state(directory)
        worker_state = read_worker_state(directory)
        driver = ApexDriver(saved["config"], executor, backend=backend, workers=workers)
        driver.load_state_dict(worker_state)
        driver.agent.restore(ckpt)
        driver.start()
        driver.load_shards(os.path.abspath(os.path.join(ckpt, SHARDS_DIR)))
        settings = {k: state.get(k) for k in ("eval_every", "eval_episodes", "eval_envs", "target_return",
                                              "checkpoint_every")}
        if isinstance(state.get("evaluation"), dict):
            settings["evaluation"] = state["evaluation"]
        settings.update({k: v for k, v in kwargs.items() if v is not None or k not in settings})
        trainer = cls(driver, None, **settings)
        trainer._restore_progress(directory, ckpt, state, driver.total_steps)
        return trainer

    def close(self) -> None:
        """Stops the driver's learner threads (the executor is the caller's to shut down)."""
        self.driver.close()
