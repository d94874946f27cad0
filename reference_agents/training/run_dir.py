"""What a `Trainer` writes into its run directory and reads back (`RunDirectory`, a mixin of `Trainer`): the
metric and episode files, TensorBoard scalars and the learning curve as the run goes, and its checkpoints (save,
and `resume` of a run from one)."""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Self

from harness.execution.formats import stamp
from reference_agents.agents.base import close_agent

from .checkpoints import TRAINER_STATE_FORMAT, load_run, saved_strategy, write_checkpoint
from .files import (LEARNING_CURVE, METRIC_COLUMNS, append_episodes, append_metric_row, json_scalar,
                    plot_learning_curve, rewrite_run_files)
from .replicas import check_resume_replicas, replicas_loader, strategy_record


class RunDirectory:
    """The run-directory side of `Trainer` (which sets every attribute used here in its ``__init__``)."""

    # ---- files --------------------------------------------------------------------------------------
    def _path(self, name: str) -> str:
        return os.path.join(self.out_dir, name)

    def _rewrite_files(self) -> None:
        """Makes the metric and episode files hold exactly this trainer's history (no rows beyond it)."""
        self._episodes_written = rewrite_run_files(self.out_dir, self.history, self.worker.episodes)

    def _write_row(self, row: dict[str, Any]) -> None:
        if self.out_dir is None:
            return
        append_metric_row(self.out_dir, row)
        self.scalars.add_row(row, self.worker)

    def _write_episodes(self) -> None:
        if self.out_dir is None:
            return
        new = self.worker.episodes[self._episodes_written:]
        if new:
            append_episodes(self.out_dir, new, self._episodes_written)
            self.scalars.add_episodes(new)
            self._episodes_written += len(new)

    def plot(self) -> str | None:
        """Rewrites ``learning_curve.png`` in the run directory; returns its path (None without
        a run directory or without matplotlib)."""
        if self.out_dir is None:
            return None
        title = f"{type(self.agent).__name__} on {self.agent.config.env.id} ({self.agent.backend})"
        ok = plot_learning_curve(self._path(LEARNING_CURVE), self.worker.episodes, self.history,
                                 self.target_return, title)
        if not ok and not self._told_no_matplotlib:
            self._told_no_matplotlib = True
            self.stream.write(f"matplotlib is not installed: no {LEARNING_CURVE} (pip install matplotlib); "
                              f"the metrics files are written as usual\n")
            self.stream.flush()
        return self._path(LEARNING_CURVE) if ok else None

    # ---- checkpoints ------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The trainer's own state: counters, settings, metric history and the strategy the agent's update ran
        with (`strategy_record`), JSON-safe, stamped with its format, format version and the spacegraph version
        (`harness.execution.formats.stamp`)."""
        state = {"backend": self.agent.backend,
                 "total_steps_target": self.total_steps_target,
                 "wall_seconds": self.wall_seconds, "train_seconds": self.train_seconds,
                 "solved_at_step": self.solved_at_step, "evaluation": self.evaluation.as_dict(),
                 "eval_every": self.eval_every, "eval_episodes": self.eval_episodes, "eval_envs": self.eval_envs,
                 "target_return": self.target_return, "checkpoint_every": self.checkpoint_every,
                 "agent_timesteps": int(self.agent.timesteps), "saved_at": time.time(),
                 "strategy": strategy_record(self.agent),
                 "history": [{k: json_scalar(r.get(k)) for k in METRIC_COLUMNS} for r in self.history]}
        return stamp(TRAINER_STATE_FORMAT, state)

    def save_checkpoint(self) -> str:
        """Writes ``out_dir/checkpoint``: ``agent.save_checkpoint``, ``worker.json`` and ``trainer.json``.

        The checkpoint is written whole into a temporary directory before the previous one
        becomes ``checkpoint.old`` by renames, so an interrupted save leaves a whole checkpoint
        (see `write_checkpoint`), and a resume falls back to ``checkpoint.old`` when the newest is damaged.

        Returns:
            The checkpoint directory.

        Raises:
            ValueError: without a run directory.
        """
        if self.out_dir is None:
            raise ValueError("Trainer.save_checkpoint: this trainer has no out_dir")
        final = write_checkpoint(self.out_dir, self.agent, self.worker, self, extra=self._write_checkpoint_extra,
                                 current_ok=self._checkpoint_ok)
        self._checkpoint_ok = True
        self.last_checkpoint = final
        self._checkpoint_step = self.worker.total_steps
        return final

    def _write_checkpoint_extra(self, folder: str) -> None:
        """Writes more files into a new checkpoint ``folder`` before it is moved into place (none here)."""

    @classmethod
    def resume(cls, directory: str | os.PathLike, backend: str | None = None,
               agent_loader: Callable[[str, str | None], Any] | None = None,
               worker_factory: Callable[[Any], Any] | None = None, replicas: int | None = None,
               replica_mode: str | None = None, **kwargs: Any) -> Self:
        """A trainer continuing the run in ``directory`` from its checkpoint.

        The agent is rebuilt from the checkpoint (replay, optimizer state and counters included),
        the worker's step, frame, update and episode counters are restored (it starts fresh
        episodes), and the metric files are rewritten to the checkpoint's rows, so rows written
        after it are dropped and none repeats. Settings not given in ``kwargs`` are the saved ones.
        When a file of the newest checkpoint is missing or damaged, the run continues from
        ``checkpoint.old`` and ``stream`` (default stderr) says so; a failing resume changes nothing.

        Args:
            directory: a run directory `save_checkpoint` wrote into.
            backend: rebuild the agent on this backend (default: the saved one).
            agent_loader: ``fn(checkpoint_dir, backend) -> agent`` (default ``reference_agents.agents.load_checkpoint``: DQN or IMPALA by the checkpoint's format).
            worker_factory: ``fn(agent) -> worker`` for the restored agent (default `VectorEnvWorker.for_agent`;
                an actor-learner run passes its `ActorLearnerWorker`).
            replicas: rebuild the agent with this many replicas of its update (``spacegraph train --resume DIR
                --replicas N``: `with_replicas` rewrites the saved config's ``execution.strategy``; None: the
                strategy the run was saved with, which starts its replica processes again).
            replica_mode: ``processes`` or ``towers`` with ``replicas`` (None: the saved config's, else processes).
            **kwargs: `Trainer` arguments overriding the saved settings.

        Raises:
            BadFileError: (a ValueError) naming the damaged files when no checkpoint loads.
            ValueError: naming the directory and what is missing or inconsistent, or ``--replicas`` /
                ``--replica-mode`` for a bad value. Nothing is left running after an error (the agent's replica
                processes, the worker's actors).
        """
        directory = os.fspath(directory)
        if replicas is not None:
            if agent_loader is not None:
                raise ValueError("Trainer.resume: give replicas or agent_loader, not both")
            agent_loader = replicas_loader(replicas, replica_mode)
            check_resume_replicas(saved_strategy(directory), directory, replicas, replica_mode)
        elif replica_mode is not None:
            raise ValueError("--replica-mode needs --replicas N")
        ckpt, state, agent, worker, settings, fell_back = load_run(directory, backend, agent_loader, kwargs,
                                                                   worker_factory, kwargs.get("stream"))
        try:
            trainer = cls(agent, None, worker=worker, **settings)
            trainer._restore_progress(directory, ckpt, state, worker.total_steps, fell_back)
        except BaseException:
            try:
                getattr(worker, "close", lambda: None)()
            finally:
                close_agent(agent)
            raise
        return trainer

    def _restore_progress(self, directory: str, ckpt: str, state: dict[str, Any], steps: int,
                          fell_back: bool = False) -> None:
        """Takes up a saved run's history, counters and clocks; rewrites its files and plot.

        ``fell_back``: the newest checkpoint was damaged and ``ckpt`` is ``checkpoint.old`` (the next save
        replaces the damaged one and keeps ``checkpoint.old``).
        """
        self.out_dir = directory
        self._checkpoint_ok = not fell_back
        self.history = [dict(r) for r in state.get("history", [])]
        self.solved_at_step = state.get("solved_at_step")
        self.total_steps_target = int(state.get("total_steps_target", 0))
        self.wall_seconds = float(state.get("wall_seconds", 0.0))
        self.train_seconds = float(state.get("train_seconds", 0.0))
        self.last_checkpoint = ckpt
        self._checkpoint_step = steps
        self._rewrite_files()
        self.plot()
