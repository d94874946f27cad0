"""`Trainer`: trains an agent on a `VectorEnvWorker` in chunks, evaluates, logs metrics, plots and checkpoints."""

from __future__ import annotations

import math
import os
import signal
import sys
import threading
import time
from typing import Any, Callable, TextIO

import numpy as np

from reference_agents.agents.base import Agent, close_agent
from reference_agents.workers import VectorEnvWorker, Worker, WorkerStats

from .checkpoints import make_run_dir
from .evaluation import EvaluationProtocol, evaluate_worker
from .files import LEARNER_COLUMNS, format_number
from .progress import ProgressBar
from .replicas import strategy_record
from .result import TrainResult
from .run_dir import RunDirectory
from .scalars import RunScalars


def _check_positive(name: str, value: Any, kind: type = int) -> None:
    ok = (not isinstance(value, bool) and isinstance(value, (int, np.integer)) if kind is int
          else not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value))
    if value is not None and (not ok or value <= 0):
        raise ValueError(f"Trainer: {name} must be a positive {'int' if kind is int else 'number'} or None; "
                         f"got {value!r}")


class Trainer(RunDirectory):
    """Trains an agent with a `VectorEnvWorker` in chunks, evaluating greedily after each.

    The worker (``VectorEnvWorker.for_agent(agent)``: the config's environments)
    runs ``evaluation.every`` env steps at a time; after each chunk the agent is evaluated
    greedily on separate environments under the `EvaluationProtocol` (the config's
    ``evaluation`` section with the arguments below replacing its values: a screen, then the
    full evaluation when the screen reaches the target) and a metrics row is recorded. The run
    is solved at the first evaluation whose *full* mean reaches ``target_return`` (never from
    the screen alone), and stops there. With ``out_dir`` the rows, the finished episodes, a learning curve and
    TensorBoard scalars (``out_dir/tensorboard``, see `reference_agents.training.scalars`) are written as they
    come, and a checkpoint (agent, worker counters, trainer state) at the end, every ``checkpoint_every`` env
    steps, and on Ctrl-C.

    Ctrl-C while stepping is deferred to the end of the current lockstep step (so the
    agent's and the worker's counters agree), then `train` saves a checkpoint and
    re-raises `KeyboardInterrupt`; a second Ctrl-C aborts at once without one. A
    ``KeyboardInterrupt`` raised by ``callback`` is handled the same way.

    `close` ends what the run holds outside this process (the worker's environments and actors, the agent's
    replica processes under ``execution.strategy`` mode ``processes``); whoever makes the trainer calls it once
    the run is over (`train` and ``spacegraph train`` do, also after an error or Ctrl-C).

    Args:
        agent: an agent with the worker-facing interface and ``config.env``/``config.evaluation``
            (a `DQNAgent`); checkpoints need ``save_checkpoint``.
        out_dir: the run directory (created); None keeps everything in memory.
        evaluation: the `EvaluationProtocol` (or a dict or config section with its fields; default
            ``agent.config.evaluation``), which the next five arguments override when given.
        eval_every: env steps between evaluations (``evaluation.every``).
        eval_episodes: episodes of the full evaluation, whose mean decides solved (``evaluation.episodes``).
        eval_envs: environments each evaluation runs in lockstep (``evaluation.envs``).
        target_return: solved (and stop) once a full evaluation's mean reaches this (``evaluation.target_return``).
        screen_episodes: episodes of the screen played before the full evaluation (``evaluation.screen_episodes``).
        checkpoint_every: also checkpoint after the evaluation at which this many env steps have
            passed since the last checkpoint (None: only at the end and on Ctrl-C).
        max_seconds: stop (evaluate, checkpoint) once training has run this long in this call.
        progress: draw a progress bar on ``stream`` (None: when ``stream`` is a terminal).
        log_evals: print one line per evaluation on ``stream`` (when no progress bar is drawn).
        stream: where the bar and lines go (default ``sys.stderr``).
        callback: ``callback(trainer, stats)`` after every lockstep step with the chunk's
            `WorkerStats` so far; returning False stops training (as ``max_seconds`` does).
        worker: a worker to use instead of ``VectorEnvWorker.for_agent(agent)``.
        tensorboard: write TensorBoard scalars into ``out_dir/tensorboard`` (a new event file per `train` call,
            earlier files' points after its start step removed; without the ``tensorboard`` package the run goes
            on without them and says so once on ``stream``).
        worker_scalars: ``fn(worker) -> {tag: value}``, scalars added to each evaluation's step (a distributed
            worker's queue sizes: `actor_learner_scalars`, `apex_scalars`).

    Raises:
        ValueError: naming an argument that is not a positive number.
    """

    def __init__(self, agent: Agent, out_dir: str | os.PathLike | None = None, *,
                 evaluation: EvaluationProtocol | dict[str, Any] | Any | None = None, eval_every: int | None = None,
                 eval_episodes: int | None = None, eval_envs: int | None = None,
                 target_return: float | None = None, screen_episodes: int | None = None,
                 checkpoint_every: int | None = None,
                 max_seconds: float | None = None, progress: bool | None = None, log_evals: bool = False,
                 stream: TextIO | None = None, callback: Callable[["Trainer", WorkerStats], Any] | None = None,
                 worker: Worker | None = None, tensorboard: bool = True,
                 worker_scalars: Callable[[Any], dict[str, float]] | None = None) -> None:
        for name, value in (("eval_every", eval_every), ("eval_episodes", eval_episodes), ("eval_envs", eval_envs),
                            ("screen_episodes", screen_episodes), ("checkpoint_every", checkpoint_every)):
            _check_positive(name, value)
        _check_positive("max_seconds", max_seconds, float)
        if target_return is not None and (isinstance(target_return, bool)
                                          or not isinstance(target_return, (int, float))):
            raise ValueError(f"Trainer: target_return must be a number or None; got {target_return!r}")
        base = evaluation if evaluation is not None else agent.config.evaluation
        if base is None and (eval_every is None or eval_episodes is None):
            raise ValueError("Trainer: give eval_every and eval_episodes (or evaluation=), or an agent whose config "
                             "has an evaluation section")
        try:
            self.evaluation = EvaluationProtocol.from_config(
                base, every=eval_every, episodes=eval_episodes, envs=eval_envs, target_return=target_return,
                screen_episodes=screen_episodes)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"Trainer: {exc}") from None
        if callback is not None and not callable(callback):
            raise ValueError(f"Trainer: callback must be callable; got {callback!r}")
        if not isinstance(tensorboard, bool) or (worker_scalars is not None and not callable(worker_scalars)):
            raise ValueError(f"Trainer: tensorboard must be True or False and worker_scalars callable or None; got "
                             f"{tensorboard!r}, {worker_scalars!r}")
        self.scalars = RunScalars(tensorboard, worker_scalars)
        self.agent = agent
        self.out_dir = None if out_dir is None else os.fspath(out_dir)
        self.checkpoint_every, self.max_seconds = checkpoint_every, max_seconds
        self.stream = stream if stream is not None else sys.stderr
        self.progress = progress if progress is not None else bool(getattr(self.stream, "isatty", lambda: False)())
        self.log_evals = log_evals
        self.callback = callback
        self.worker = worker if worker is not None else VectorEnvWorker.for_agent(agent)
        self.history: list[dict[str, Any]] = []
        self.solved_at_step: int | None = None
        self.total_steps_target = 0
        self.wall_seconds = 0.0      # all train() calls, evaluation included
        self.train_seconds = 0.0     # stepping and updating only
        self.last_checkpoint: str | None = None
        self.result: TrainResult | None = None
        self._episodes_written = 0
        self._checkpoint_step = 0
        self._phase = "idle"         # "step" while the worker is inside a lockstep step
        self._interrupt_requested = False
        self._stop_reason: str | None = None
        self._bar: ProgressBar | None = None
        self._call_start = self._wall_base = 0.0
        self._chunk_start: float | None = None
        self._bar_start_steps = 0
        self._recent_eval = math.nan
        self._told_no_matplotlib = False
        self._checkpoint_ok: bool | None = None  # whether out_dir/checkpoint is whole (None: unknown)
        if self.out_dir is not None:
            make_run_dir(self.out_dir)
            self._rewrite_files()

    # the protocol's settings under their Trainer argument names
    eval_every = property(lambda self: self.evaluation.every)
    eval_episodes = property(lambda self: self.evaluation.episodes)
    eval_envs = property(lambda self: self.evaluation.envs)
    target_return = property(lambda self: self.evaluation.target_return)
    screen_episodes = property(lambda self: self.evaluation.screen_episodes)

    # ---- training -------------------------------------------------------------------------------------
    def _fields(self) -> dict[str, str]:
        w = self.worker
        rate = (w.total_steps - self._bar_start_steps) / max(time.perf_counter() - self._call_start, 1e-9)
        fields = {"steps/s": f"{rate:,.0f}", "return(100)": format_number(w.mean_return(100)),
                  "eval": format_number(self._recent_eval)}
        epsilon = self.agent.epsilon()
        if epsilon is not None:
            fields["eps"] = f"{epsilon:.3f}"
        return fields

    def _on_step(self, stats: WorkerStats) -> bool | None:
        self._phase = "boundary"  # the step is fully accounted: an interrupt here is clean
        if self._interrupt_requested:
            raise KeyboardInterrupt
        if self.callback is not None and self.callback(self, stats) is False:
            self._stop_reason = "callback"
        elif self.max_seconds is not None and time.perf_counter() - self._call_start >= self.max_seconds:
            self._stop_reason = "max_seconds"
        if self._bar is not None:
            self._bar.update(self.worker.total_steps, self._fields())
        self._phase = "step"
        return False if self._stop_reason else None

    def _on_sigint(self, signum: int, frame: Any) -> None:
        first, self._interrupt_requested = not self._interrupt_requested, True
        # The flag outlives the exception raised below: Python prints and drops an exception raised inside a
        # weakref callback or a __del__ (a garbage collection can run one at any moment), so the next step
        # boundary and the loop raise it again rather than train on.
        if self._phase == "step" and first:
            self.stream.write("\nCtrl-C: stopping after this step and saving a checkpoint "
                              "(Ctrl-C again to abort without one)\n")
            self.stream.flush()
            return
        raise KeyboardInterrupt

    def _evaluate(self, chunk_steps: int, chunk_seconds: float) -> dict[str, Any]:
        self._phase = "eval"
        ev = evaluate_worker(self.worker, self.evaluation)
        self._phase = "io"
        w = self.worker
        epsilon = self.agent.epsilon()
        self._tick()
        row = {"env_steps": w.total_steps, "frames": w.total_frames, "wall_s": self.wall_seconds,
               "train_s": self.train_seconds, "eval_s": ev.seconds,
               "steps_per_s": chunk_steps / chunk_seconds if chunk_seconds > 0 else math.nan,
               "frames_per_s": chunk_steps * w.frames_per_step / chunk_seconds if chunk_seconds > 0 else math.nan,
               "episodes": len(w.episodes), "train_return_100": w.mean_return(100),
               "eval_return": ev.mean, "eval_episodes": len(ev.returns),
               "screen_return": ev.screen_mean,
               "solved": None if self.target_return is None else int(ev.solved),
               "epsilon": None if epsilon is None else float(epsilon),
               "updates": w.total_updates, "last_loss": w.last_loss}
        means = w.update_means.take() if hasattr(w, "update_means") else {}   # a user's worker may keep none
        row.update({c: means.get(c) for c in LEARNER_COLUMNS})
        self._recent_eval = row["eval_return"]
        return row

    def _log(self, row: dict[str, Any]) -> None:
        if self.log_evals and self._bar is None:
            screen = row.get("screen_return")
            full = screen is not None and not math.isnan(screen) and row["eval_episodes"] != self.screen_episodes
            note = (f", {self.screen_episodes}-episode screen {screen:.2f}" if full else "") + (
                ", solved" if row.get("solved") else "")
            self.stream.write(f"step {row['env_steps']:>9,}  eval {row['eval_return']:8.2f} "
                              f"({row['eval_episodes']} ep{note})  return(100) {row['train_return_100']:8.2f}  "
                              f"{row['steps_per_s']:7.0f} steps/s  episodes {row['episodes']}\n")
            self.stream.flush()

    def _tick(self) -> None:
        """Brings ``wall_seconds`` up to now: earlier calls' time plus this call's so far."""
        self.wall_seconds = self._wall_base + time.perf_counter() - self._call_start

    def _make_result(self, stop_reason: str) -> TrainResult:
        w = self.worker
        return TrainResult(list(self.history), self.solved_at_step, w.total_steps, w.total_frames, len(w.episodes),
                           time.perf_counter() - self._call_start, self.wall_seconds, self.train_seconds,
                           stop_reason, self.out_dir, self.last_checkpoint, strategy_record(self.agent))

    def train(self, steps: int | None = None) -> TrainResult:
        """Trains until the worker has taken ``steps`` env steps in all (resumed runs included).

        Args:
            steps: the total env-step count to reach (default: the resumed run's saved total).

        Returns:
            The `TrainResult` (also kept as ``self.result``).

        Raises:
            KeyboardInterrupt: after Ctrl-C (or a callback raising it), once the checkpoint is written.
            ValueError: if ``steps`` is not a positive int.
        """
        steps = self.total_steps_target if steps is None else steps
        if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps <= 0:
            raise ValueError(f"Trainer.train: steps must be a positive int (the total env steps); got {steps!r}")
        self.total_steps_target = int(steps)
        w = self.worker
        self._call_start = time.perf_counter()
        self._wall_base = self.wall_seconds
        self._bar_start_steps = w.total_steps
        self._stop_reason, self._interrupt_requested = None, False
        self._bar = ProgressBar(self.total_steps_target, self.stream) if self.progress else None
        if self.out_dir is not None:
            self.scalars.open(self.out_dir, w.total_steps, self.stream)
        previous = None
        if threading.current_thread() is threading.main_thread():
            previous = signal.signal(signal.SIGINT, self._on_sigint)
        try:
            while w.total_steps < self.total_steps_target and self._stop_reason is None:
                if self._interrupt_requested:  # a Ctrl-C whose KeyboardInterrupt was dropped
                    raise KeyboardInterrupt
                boundary = (w.total_steps // self.eval_every + 1) * self.eval_every
                chunk = min(boundary, self.total_steps_target) - w.total_steps
                self._chunk_start = time.perf_counter()
                self._phase = "step"
                stats = w.run(num_steps=chunk, callback=self._on_step, callback_every=w.num_envs)
                self._phase = "io"
                seconds = time.perf_counter() - self._chunk_start
                self._chunk_start = None
                self.train_seconds += seconds
                self._write_episodes()
                row = self._evaluate(stats.steps, seconds)
                self.history.append(row)
                self._write_row(row)
                self._log(row)
                if row["solved"] and self.solved_at_step is None:  # the full evaluation's mean, never the screen
                    self.solved_at_step = int(row["env_steps"])
                    self._stop_reason = "target_return"
                if self.out_dir is not None:
                    self.plot()
                    if (self.checkpoint_every is not None and w.total_steps < self.total_steps_target
                            and self._stop_reason is None
                            and w.total_steps - self._checkpoint_step >= self.checkpoint_every):
                        self.save_checkpoint()
                if self._bar is not None:
                    self._bar.update(w.total_steps, self._fields(), force=True)
            self._phase = "io"
            if self._interrupt_requested:
                raise KeyboardInterrupt
            self._tick()
            if self.out_dir is not None:
                self.save_checkpoint()
            self.result = self._make_result(self._stop_reason or "steps")
            return self.result
        except KeyboardInterrupt:
            clean = self._phase != "step"
            self._phase = "io"
            if self._chunk_start is not None:  # the steps of the cut chunk count too
                self.train_seconds += time.perf_counter() - self._chunk_start
                self._chunk_start = None
            self._tick()
            if self._bar is not None:
                self._bar.close()
                self._bar = None
            if self.out_dir is not None:
                self._write_episodes()
                if clean:  # (the learning curve stays as the last evaluation drew it)
                    self.save_checkpoint()
            self.result = self._make_result("interrupted")
            self.result.checkpoint = self.last_checkpoint if clean else None
            raise
        finally:
            self._phase = "idle"
            self.scalars.close()
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
            if self._bar is not None:
                self._bar.close()
                self._bar = None

    def close(self) -> None:
        """Ends what the run holds outside this process: the worker's environments (and a distributed worker's
        actors) and the agent's replica processes (`close_agent`). Idempotent; the caller that made the trainer
        calls it when the run ends, fails or is interrupted (``spacegraph train`` does)."""
        try:
            close = getattr(self.worker, "close", None)
            if callable(close):
                close()
        finally:
            close_agent(self.agent)


def train(config: Any, steps: int, backend: str | None = None, seed: int | None = None,
          out_dir: str | os.PathLike | None = None, **trainer_kwargs: Any) -> TrainResult:
    """Builds an agent from ``config`` (a file, a bare name in ``reference_agents/configs``, a dict)
    and trains it for ``steps`` env steps with a `Trainer`, closed after (`Trainer.close`); returns the
    `TrainResult`.

    Raises:
        ConfigError: for a bad config (naming the file and key path).
    """
    from reference_agents.agents import build_agent

    agent = build_agent(config, backend=backend, seed=seed)
    try:
        trainer = Trainer(agent, out_dir, **trainer_kwargs)
    except BaseException:
        close_agent(agent)
        raise
    try:
        return trainer.train(steps)
    finally:
        trainer.close()
