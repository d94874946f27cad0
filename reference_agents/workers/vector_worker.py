"""`VectorEnvWorker`: acts on N environments with one batched agent call per step, observes, updates."""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Callable

import numpy as np

from harness.execution.inputs import default_validate
from harness.seeds import derive_seed
from reference_agents.components.helpers.n_step import NStepAccumulator
from reference_agents.workers.act_time_priorities import ActTimePriorities
from reference_agents.workers.checks import WorkerChecks
from reference_agents.workers.envs import EnvFactory, index_value
from reference_agents.workers.greedy import GreedyEvaluation
from reference_agents.workers.native_envs import make_vector_env
from reference_agents.workers.results import (Episode, SampleBatch, UpdateMeans, WorkerStats, concat_records,
                                               mean_episode_return, stack_records)


#: What `VectorEnvWorker._step` returns for no episodes, records or metrics (nothing appends to it).
_NONE: list = []


class VectorEnvWorker(WorkerChecks, GreedyEvaluation):
    """Runs an agent on N environments in lockstep: act (batched), step, observe, update.

    Each step makes one ``agent.get_actions(obs [N, ...], explore=explore)`` call,
    steps every environment (`VectorEnv`: finished episodes restart at once) and
    passes the N transitions on:

    - by default to ``agent.observe(states, actions, rewards, terminated, next_states,
      env_id=range(N), truncated=truncated)``; the agent folds n-step windows per env;
    - with ``worker_side_n_step`` the worker folds them itself (one `NStepAccumulator`
      per environment) and calls ``agent.observe_transitions(records)`` with the finished
      ones;
    - with ``observe=False`` nothing reaches the agent: `sample` returns the folded
      transitions instead, for a replay elsewhere (Ape-X); `run` then only acts and steps
      (it keeps nothing, so it folds nothing, and n-step windows left open by an earlier
      `sample` are dropped). ``compute_priorities`` adds their initial priorities from the act
      call's Q-values (``agent.get_actions_and_q_values``, one forward pass per step;
      `ActTimePriorities`, which says when ``agent.q_values`` is called and why a transition may
      come with the next `sample` call).

    With worker-side folding the agent counts the records it is given as its env
    steps (``observe_transitions``); each env step starts one window and every
    window becomes one record, so the agent's count trails the worker's by the
    windows still open (at most ``(n - 1) * N``).

    A transition's ``next_states`` row is the observation its step returned, also when
    that step ended the episode; the worker acts on the reset observation. After
    observing, ``agent.update_on_schedule()`` runs (with ``update``), and
    ``agent.reset_preprocessor(ids)`` restarts the stateful preprocessing (frame
    stacks) of environments whose episode ended.

    Steps are counted summed over environments, frames as steps times the
    environments' `frames_per_step` (4 for ``ALE/*-v5``).

    Args:
        agent: an object with the agent interface (``get_actions``, ``observe``,
            ``observe_transitions``, ``update_on_schedule``, ``get_actions_and_q_values`` and ``q_values``
            (``compute_priorities``), ``reset_preprocessor``,
            ``state_space``, and optionally ``action_space``: see ``validate``); only the methods a
            configuration uses are needed.
        env_id: a gymnasium id, or a callable returning a new environment.
        num_envs: the number of environments N.
        seed: environment ``i`` is reset with ``seed + i`` the first time.
        env_kwargs: keyword arguments for `make_env` (``gymnasium.make``'s, and ``atari``), and ``vectorizer``
            (`reference_agents.workers.native_envs.make_vector_env`: python, ale or envpool).
        n_step: the window length for worker-side folding; default the agent config's
            ``n_step`` (1 without one).
        worker_side_n_step: fold n-step transitions in the worker, not in the agent.
        compute_priorities: compute the initial priorities of the transitions `sample` returns from the
            act-time Q-values (needs ``observe=False``).
        gamma: the discount for worker-side folding; default the agent config's ``gamma``.
        observe: pass transitions to the agent.
        update: call ``agent.update_on_schedule()`` after each step.
        explore: act with exploration (``get_actions(explore=...)``).
        validate: also check the observations of every later reset against the agent's state space
            (the first reset's always are); None (default) takes the process default,
            `harness.execution.inputs.default_validate` (``$SPACEGRAPH_VALIDATE``: on in the test
            suites and the ``spacegraph`` command, off in benchmarks). At 16 CartPole environments an
            episode ends on most steps, and the check was about 5% of a step. Validate also checks every
            step's actions of an agent that declares the environment's action space (``action_space``);
            without it only the first construction-time comparison holds such an agent to its space.
            An agent that declares none, or another space, has its actions checked on every step either way.

    Raises:
        ValueError: for invalid arguments, an unknown env id, or environments whose spaces do not
            fit the agent's (naming both).
    """

    SMALL_ACTIONS = 32     # up to this many discrete actions per step are bounds-checked in Python, not NumPy

    def __init__(self, agent: Any, env_id: str | EnvFactory, num_envs: int = 1, seed: int = 0,
                 env_kwargs: dict[str, Any] | None = None, n_step: int | None = None,
                 worker_side_n_step: bool = False, compute_priorities: bool = False,
                 gamma: float | None = None, observe: bool = True, update: bool = True,
                 explore: bool = True, validate: bool | None = None) -> None:
        for name, value in (("worker_side_n_step", worker_side_n_step), ("compute_priorities", compute_priorities),
                            ("observe", observe), ("update", update), ("explore", explore)):
            if not isinstance(value, bool):
                raise ValueError(f"VectorEnvWorker: {name} must be a bool; got {value!r}")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise ValueError(f"VectorEnvWorker: seed must be an int; got {seed!r}")
        if seed < 0:
            raise ValueError(f"VectorEnvWorker: seed must be >= 0 (environments take non-negative seeds); got {seed}")
        if compute_priorities and observe:
            raise ValueError("VectorEnvWorker: compute_priorities needs observe=False (the priorities come with "
                             "the transitions `sample` returns; an observing worker hands them to the agent)")
        self.agent = agent
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs or {})
        self.seed = int(seed)
        self.worker_side_n_step = worker_side_n_step
        self.compute_priorities = compute_priorities
        self.observe = observe
        self.update = update
        self.explore = explore
        self.validate = default_validate() if validate is None else bool(validate)
        self.folds = worker_side_n_step or not observe
        self.n_step = self._resolve("n_step", n_step, 1, positive_int=True) if self.folds else None
        self.gamma = self._resolve("gamma", gamma, None) if self.folds else None
        self.envs = make_vector_env(env_id, num_envs, self.env_kwargs or None)
        self.num_envs = self.envs.num_envs
        self._env_ids = list(range(self.num_envs))
        self.frames_per_step = self.envs.frames_per_step
        # frames per step is a whole number for every environment known (1, or 4 for ALE v5): frames are then an
        # int multiply per step, not a float multiply and a round
        fps = float(self.frames_per_step)
        self._whole_fps = int(fps) if fps.is_integer() else None
        self._check_spaces()
        self._accumulators = ([NStepAccumulator(self.n_step, self.gamma) for _ in range(self.num_envs)]
                              if self.folds else [])
        self._scorer = ActTimePriorities(self.num_envs) if compute_priorities else None
        self._obs: Any = None
        self._running_return = np.zeros(self.num_envs, np.float64)
        # An episode's length is the lockstep steps since it started (one counter, not an add per env and step).
        self._lockstep = 0
        self._episode_start = np.zeros(self.num_envs, np.int64)
        self.total_steps = 0
        self.total_frames = 0
        self.total_updates = 0
        self.last_loss: float | None = None
        self.update_means = UpdateMeans()   # the learning diagnostics of the Trainer's next metric row
        self.episodes: list[Episode] = []
        self.resets = 0  # how many times the environments were (re)started from outside: 1 + resumes
        self.last_priorities: np.ndarray | None = None

    @classmethod
    def for_agent(cls, agent: Any, **kwargs: Any) -> "VectorEnvWorker":
        """A worker on the environments an agent's config names, seeded with the agent's seed.

        Reads ``agent.config.env`` (``id``, ``num_envs``, ``kwargs``, ``atari``, ``vectorizer``) and ``agent.seed``;
        keyword arguments override them (``env_kwargs`` replaces the config's ``env.kwargs`` whole)
        and pass the rest of the constructor's options.

        Raises:
            ValueError: if the agent has no ``config.env``.
        """
        env = getattr(getattr(agent, "config", None), "env", None)
        if env is None or not hasattr(env, "id"):
            raise ValueError(f"VectorEnvWorker.for_agent: {type(agent).__name__} has no config.env to read the "
                             f"environment from; use VectorEnvWorker(agent, env_id, ...)")
        env_kwargs = dict(getattr(env, "kwargs", None) or {})
        if getattr(env, "atari", False):
            env_kwargs["atari"] = True
        if getattr(env, "vectorizer", "python") != "python":
            env_kwargs["vectorizer"] = env.vectorizer
        seed = getattr(agent, "seed", None)
        args: dict[str, Any] = {"env_id": env.id, "num_envs": getattr(env, "num_envs", 1),
                                "seed": 0 if seed is None else seed, "env_kwargs": env_kwargs}
        args.update(kwargs)
        return cls(agent, **args)

    # ---- environments -------------------------------------------------------------------
    def _start(self) -> None:
        """(Re)starts every environment: a fresh worker uses ``seed``, a resumed one a later seed
        (``derive_seed(seed, "reset", resets)``)."""
        self._obs = self.envs.reset(seed=derive_seed(self.seed, "reset", self.resets))
        self.resets += 1
        self._running_return[:] = 0.0
        self._episode_start[:] = self._lockstep
        self._drop_open_windows()
        self._check_observations(self._obs, "after reset")
        if hasattr(self.agent, "reset_preprocessor"):
            self.agent.reset_preprocessor(list(range(self.num_envs)))

    def _step(self, keep_records: bool) -> tuple[list[Episode], list[dict[str, Any]], list[dict]]:
        """One lockstep step of all environments; returns finished episodes, folded records and update metrics."""
        step = self.total_steps
        obs = self._obs
        scorer = self._scorer if keep_records else None
        if scorer is not None:
            actions, q_values = self.agent.get_actions_and_q_values(obs, explore=self.explore)
        else:
            actions = self.agent.get_actions(obs, explore=self.explore)
        if not self._trusted_actions:
            actions = self._check_actions(actions, step)
        if scorer is not None:
            scorer.acted(q_values, actions)
        next_obs, rewards, terminated, truncated, _, act_on = self.envs.step(actions)
        any_done = act_on is not next_obs  # VectorEnv.step returns one object for both when no episode ended
        if any_done and self.validate:
            self._check_observations(act_on, f"reset after worker step {step}")
        records: list[dict[str, Any]] = _NONE
        if self.folds and (self.observe or keep_records):
            records = []
            for i, acc in enumerate(self._accumulators):
                done = acc.push(index_value(obs, i), actions[i], rewards[i], index_value(next_obs, i),
                                bool(terminated[i]), bool(truncated[i]))
                if scorer is None:
                    records.extend(done)
                elif done:
                    scorer.finished(i, done, bool(truncated[i]))
            if scorer is not None:
                scorer.score_truncated(self.agent, next_obs)
                records, self.last_priorities = scorer.take()
            if records:
                batch = stack_records(records)
                if self.observe:
                    self.agent.observe_transitions(batch)
                records = [batch]
        elif self.observe:
            self.agent.observe(obs, actions, rewards, terminated, next_obs, env_id=self._env_ids,
                               truncated=truncated)
        metrics: list[dict] = list(self.agent.update_on_schedule() or _NONE) if self.update else _NONE
        self.total_steps += self.num_envs
        self.total_frames = (self.total_steps * self._whole_fps if self._whole_fps is not None
                             else int(round(self.total_steps * self.frames_per_step)))
        self._running_return += rewards
        self._lockstep += 1
        if not any_done:
            self._obs = act_on
            return _NONE, records, metrics
        finished = []
        for i in self.envs.done_indices.tolist():
            length = int(self._lockstep - self._episode_start[i])
            finished.append(Episode(i, float(self._running_return[i]), length, bool(terminated[i]),
                                    bool(truncated[i]), self.total_steps, self.total_frames))
            self._running_return[i] = 0.0
            self._episode_start[i] = self._lockstep
        if finished and hasattr(self.agent, "reset_preprocessor"):
            self.agent.reset_preprocessor([e.env_id for e in finished])
        self.episodes.extend(finished)
        self._obs = act_on
        return finished, records, metrics

    # ---- running ------------------------------------------------------------------------
    def run(self, num_steps: int | None = None, num_episodes: int | None = None,
            callback: Callable[[WorkerStats], Any] | None = None, callback_every: int = 1000) -> WorkerStats:
        """Steps all environments until ``num_steps`` env steps or ``num_episodes`` episodes are done.

        Episodes in progress carry over to the next call. ``num_steps`` counts env steps summed over
        the N environments, and is reached in whole lockstep steps (so it may be exceeded by up to N-1).

        Args:
            num_steps: stop after this many env steps (summed over environments).
            num_episodes: stop after this many episodes finished (in any environment).
            callback: called as ``callback(stats)`` with the run's `WorkerStats` so far every
                ``callback_every`` env steps and once at the end (for progress bars and metric logs);
                returning ``False`` stops the run (``stats.stopped_by_callback``).
            callback_every: env steps between callback calls, a positive int.

        Returns:
            The run's `WorkerStats`.

        Raises:
            ValueError: if neither stopping condition is given, or one is not a positive int; if the
                agent's actions or the environments' observations do not fit (naming the step, the
                env and what was expected).
        """
        return self._loop(num_steps, num_episodes, callback, callback_every, keep_records=False)[0]

    def sample(self, num_steps: int) -> SampleBatch:
        """Steps ``num_steps`` env steps and returns the transitions they finished (Ape-X workers).

        The transitions are folded in the worker (n-step per environment); windows still open carry
        over to the next call. With ``compute_priorities`` their act-time priorities come along (a
        transition whose bootstrap state is acted on in the next call's first step comes with that
        call). They are also observed by the agent only when the worker was made with ``observe=True``.

        Raises:
            ValueError: if the worker does not fold transitions (``observe=True`` without
                ``worker_side_n_step``), or ``num_steps`` is not a positive int.
        """
        if not self.folds:
            raise ValueError("VectorEnvWorker.sample: the worker does not fold transitions; make it with "
                             "observe=False (or worker_side_n_step=True)")
        stats, records, priorities = self._loop(num_steps, None, None, 1000, keep_records=True)
        prio = np.concatenate(priorities) if priorities else (np.zeros(0) if self.compute_priorities else None)
        return SampleBatch(concat_records(records), prio, stats)

    def _drop_open_windows(self) -> None:
        for acc in self._accumulators:
            acc.clear()
        if self._scorer is not None:
            self._scorer.clear()

    def _loop(self, num_steps: int | None, num_episodes: int | None, callback: Callable[[WorkerStats], Any] | None,
              callback_every: int, keep_records: bool) -> tuple[WorkerStats, list[dict], list[np.ndarray]]:
        for name, value in (("num_steps", num_steps), ("num_episodes", num_episodes),
                            ("callback_every", callback_every)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer))
                                      or value <= 0):
                raise ValueError(f"VectorEnvWorker.run: {name} must be a positive int or None; got {value!r}")
        if num_steps is None and num_episodes is None:
            raise ValueError("VectorEnvWorker.run: give num_steps and/or num_episodes")
        if callback is not None and not callable(callback):
            raise ValueError(f"VectorEnvWorker.run: callback must be callable; got {callback!r}")
        if self._obs is None:
            self._start()
        if self.folds and not (self.observe or keep_records):
            # `run` of a worker that does not observe keeps nothing, so it folds nothing; windows left open by
            # an earlier `sample` are dropped, as their next steps are not collected.
            self._drop_open_windows()
        stats = WorkerStats()
        records: list[dict] = []
        priorities: list[np.ndarray] = []
        start_steps, start = self.total_steps, time.perf_counter()
        next_callback = callback_every
        stop_steps = math.inf if num_steps is None else num_steps
        while True:
            finished, recs, metrics = self._step(keep_records)
            if keep_records and recs:
                records.extend(recs)
                if self.compute_priorities:
                    priorities.append(self.last_priorities)
            if finished:
                stats.episodes.extend(finished)
            if metrics:
                stats.num_updates += len(metrics)
                self.total_updates += len(metrics)
                for m in metrics:
                    self.update_means.add(m)
                loss = metrics[-1].get("loss") if isinstance(metrics[-1], dict) else None
                self.last_loss = stats.last_loss = None if loss is None else float(loss)
            stats.steps = self.total_steps - start_steps
            done = stats.steps >= stop_steps or (num_episodes is not None and len(stats.episodes) >= num_episodes)
            if callback is not None and (stats.steps >= next_callback or done):
                next_callback = (stats.steps // callback_every + 1) * callback_every
                self._fill(stats, start)
                if callback(stats) is False:
                    stats.stopped_by_callback = True
                    break
            if done:
                break
        self._fill(stats, start)
        return stats, records, priorities

    def _fill(self, stats: WorkerStats, start: float) -> None:
        stats.seconds = time.perf_counter() - start
        stats.frames = int(round(stats.steps * self.frames_per_step))
        stats.steps_per_s = stats.steps / stats.seconds if stats.seconds > 0 else 0.0
        stats.frames_per_s = stats.frames / stats.seconds if stats.seconds > 0 else 0.0
        stats.mean_return_100 = self.mean_return(100)
        stats.total_steps, stats.total_frames = self.total_steps, self.total_frames

    def mean_return(self, last: int = 100) -> float:
        """The mean return of the last ``last`` finished episodes (NaN before the first)."""
        return mean_episode_return(self.episodes, last)

    # ---- checkpoints --------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The worker's counters and episode history (plain Python values).

        Environment states cannot be saved: a worker restored with `load_state_dict` starts fresh
        episodes (with a different seed than the first start), while its step, frame, update and
        episode numbering continue. Episodes in progress and open n-step windows are dropped.
        """
        return {
            "num_envs": self.num_envs,
            "total_steps": self.total_steps,
            "total_frames": self.total_frames,
            "total_updates": self.total_updates,
            "last_loss": self.last_loss,
            "resets": self.resets,
            "episodes": [dataclasses.asdict(e) for e in self.episodes],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores what `state_dict` returned; the next `run` starts fresh episodes.

        Raises:
            ValueError: naming the missing keys or a value of the wrong kind.
        """
        if not isinstance(state, dict):
            raise ValueError(f"VectorEnvWorker.load_state_dict: expected a dict; got {type(state).__name__}")
        keys = ("total_steps", "total_frames", "total_updates", "last_loss", "resets", "episodes")
        missing = [k for k in keys if k not in state]
        if missing:
            raise ValueError(f"VectorEnvWorker.load_state_dict: missing keys {missing}")
        for k in ("total_steps", "total_frames", "total_updates", "resets"):
            v = state[k]
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
                raise ValueError(f"VectorEnvWorker.load_state_dict: {k} must be a non-negative int; got {v!r}")
        try:
            episodes = [Episode(**e) for e in state["episodes"]]
        except TypeError as exc:
            raise ValueError(f"VectorEnvWorker.load_state_dict: episodes must be dicts with the fields of "
                             f"Episode {[f.name for f in dataclasses.fields(Episode)]}: {exc}") from exc
        self.total_steps = int(state["total_steps"])
        self.total_frames = int(state["total_frames"])
        self.total_updates = int(state["total_updates"])
        self.last_loss = state["last_loss"]
        self.resets = max(int(state["resets"]), 1)
        self.episodes = episodes
        self._obs = None  # the next run restarts the environments

    def close(self) -> None:
        """Closes the environments."""
        self.envs.close()
