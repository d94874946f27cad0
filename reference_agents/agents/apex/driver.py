"""`ApexDriver`: Ape-X's coordination loop on the driver, written against `ActorExecutor` (no Ray import).

N `ApexWorker` actors sample n-step transitions with initial priorities, the driver tags them and sends
each batch to one of M `ReplayShard` actors (round robin over the live ones), and the `ApexLearner` learns
from the shards in its own threads. The driver has `VectorEnvWorker`'s interface (``run``, ``evaluate``,
``episodes``, counters, ``state_dict``), so the `Trainer` behind ``spacegraph train`` drives it unchanged:
same progress bar, metrics files, learning curve and checkpoints.

Faults: a worker whose call fails (its process died, or its environment raised) is restarted, moves its
seed on and gets the latest weights; a shard that dies is reported by name (``shard_failures``), the
learner goes on with the others, and it comes back empty or from its last snapshot. The ledger counts
every transition: ``produced = held + evicted + lost`` (`ledger`).
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
import tempfile
import threading
import time
import warnings
from typing import Any, Callable, TextIO

import numpy as np

from harness.execution.actors import ActorExecutor, ActorFailure, ActorHandle, Future
from harness.seeds import derive_seed
from reference_agents.agents.apex.config import ApexConfig, load_apex_config
from reference_agents.agents.apex.learner import ApexLearner
from reference_agents.agents.apex.shard import ReplayShard
from reference_agents.agents.apex.agent import ApexAgent
from reference_agents.agents.apex.books import ShardBook, ShardBooks
from reference_agents.agents.apex.worker import ApexWorker
from reference_agents.agents.base import acting_config, close_agent
from reference_agents.agents.dqn.replay_stores import BATCH_LAYOUTS
from reference_agents.components.explorations import apex_epsilons
from reference_agents.workers import Episode, VectorEnvWorker, WorkerStats
from reference_agents.workers.results import UpdateMeans, mean_episode_return

class ApexDriver(ShardBooks):
    """Runs Ape-X: workers and shards as actors of ``executor``, the learner here.

    Args:
        config: an Ape-X or DQN config (file, dict or object; see `load_apex_config`).
        executor: where the actors run (`InProcessActorExecutor`, `RayActorExecutor`); the caller shuts it down.
        backend, seed: override the config's.
        workers, shards: override ``apex.workers`` / ``apex.shards``.
        snapshot_dir: where shards write snapshots (default: a temporary folder when ``apex.snapshot_every`` is set).
        stream: where shard failures are reported (default ``sys.stderr``).
        timeout: seconds any one actor call may take before the run fails.
    """

    def __init__(self, config: Any, executor: ActorExecutor, *, backend: str | None = None, seed: int | None = None,
                 workers: int | None = None, shards: int | None = None, snapshot_dir: str | None = None,
                 stream: TextIO | None = None, timeout: float = 300.0) -> None:
        self.config, self.config_source = load_apex_config(config, {"backend": backend, "seed": seed},
                                                           {"workers": workers, "shards": shards})
        cfg: ApexConfig = self.config
        # batches and weights that arrive from an object store are read-only; the graph only reads them
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        self.executor, self.timeout = executor, float(timeout)
        self.stream = stream if stream is not None else sys.stderr
        # the learner's graph; it never acts in training, so its epsilon is the workers' base rate (the
        # metrics' "epsilon" column)
        self.agent = ApexAgent(cfg, exploration={"type": "constant", "value": cfg.apex.epsilon})
        self.backend, self.seed = self.agent.backend, self.agent.seed
        self.num_workers, self.num_shards = cfg.apex.workers, cfg.apex.shards
        self.epsilons = apex_epsilons(self.num_workers, cfg.apex.epsilon, cfg.apex.alpha)
        self.num_envs = self.num_workers * cfg.env.num_envs
        self.frames_per_step = 1.0
        self.snapshot_dir = snapshot_dir
        self._temporary_snapshot_dir: str | None = None
        self.episodes: list[Episode] = []
        self.total_steps = self.total_frames = 0
        self.produced = 0                       # transitions received from workers (and sent to shards)
        self.resets = 1
        self.worker_failures: list[dict[str, Any]] = []
        self.shard_failures: list[dict[str, Any]] = []
        self.books = [ShardBook() for _ in range(self.num_shards)]
        self.workers: list[ActorHandle] = []
        self.shards: list[ActorHandle] = []
        self.learner: ApexLearner | None = None
        self._dead_shards: dict[int, tuple[int, str]] = {}
        self._reported_deaths: set[tuple[int, int]] = set()   # (shard, incarnation): each incarnation dies once
        self._dead_lock = threading.Lock()
        self._sent_version = 0
        self._next_shard = 0
        self._next_snapshot: int | None = None
        self._has_snapshot = [False] * self.num_shards
        self._eval_worker: VectorEnvWorker | None = None
        self._worker_instances: dict[int, str] = {}
        self._retired: set[str] = set()
        self._restore_state: dict[str, Any] | None = None
        self._started = False

    # ---- start and stop ---------------------------------------------------------------------------------
    def _shard_args(self, j: int) -> tuple:
        cfg = self.config
        mem = cfg.memory
        frames, frame_capacity, match_window = None, None, None
        if mem.type == "frames":
            shape = self.agent.state_space.shape
            frames = (tuple(shape[:-1]), int(shape[-1]))
            # frame slots and the match window are per store: each shard gets its share of the total
            frame_capacity = None if mem.frame_capacity is None else -(-mem.frame_capacity // self.num_shards)
            match_window = mem.match_window
        return (f"shard-{j}", cfg.shard_capacity(), frames, mem.alpha, mem.beta, mem.epsilon,
                mem.compression if mem.type == "frames" else None, BATCH_LAYOUTS.get(self.backend, "nchw_view"),
                derive_seed(self.seed, "shard", j), cfg.shards_prioritized(), frame_capacity, match_window)

    def start(self) -> None:
        """Starts the shard and worker actors and the learner threads, and sends the first weights."""
        if self._started:
            return
        cfg = self.config
        a = cfg.apex
        self.shards = [self.executor.start(f"shard-{j}", ReplayShard, *self._shard_args(j), restarts=a.restarts,
                                           cpus=a.shard_cpus) for j in range(self.num_shards)]
        whole = acting_config(cfg.model_dump(by_alias=True))  # workers act: the update's replicas are the learner's
        self.workers = [self.executor.start(f"worker-{i}", ApexWorker, whole, i, float(self.epsilons[i]),
                                            restarts=a.restarts, cpus=a.worker_cpus) for i in range(self.num_workers)]
        infos = [w.call("info") for w in self.workers] + [s.call("ping") for s in self.shards]
        try:
            answers = [f.result(timeout=self.timeout) for f in infos]
        except ActorFailure as failure:
            raise RuntimeError(f"ApexDriver: an actor did not start: {failure}") from None
        self.frames_per_step = float(answers[0]["frames_per_step"])
        if self.snapshot_dir is None and a.snapshot_every is not None:
            self.snapshot_dir = self._temporary_snapshot_dir = tempfile.mkdtemp(prefix="apex-shards-")
        if a.snapshot_every is not None:
            self._next_snapshot = self.total_steps + a.snapshot_every
        self.learner = ApexLearner(self.agent, self.shards, cfg.update.batch_size, a.prefetch, a.publish_every,
                                   self.executor.put, self._allowed_updates, self._on_shard_failure,
                                   sample_timeout=self.timeout, priority_every=a.priority_every,
                                   samples_in_flight=a.samples_in_flight, wait=self.executor.wait)
        if self._restore_state is not None:
            self.learner.updates = int(self._restore_state.get("learner_updates", 0))
            self.learner.records_learned = int(self._restore_state.get("records_learned", 0))
        self.learner.start()
        self._started = True
        self._send_weights()

    def close(self) -> None:
        """Stops the learner threads, closes the evaluation environments, ends the learner agent's replica
        processes (`close_agent`) and removes the temporary snapshot folder the driver made itself (a
        ``snapshot_dir`` given to it stays; the executor stays the caller's). Idempotent."""
        try:
            if self.learner is not None:
                self.learner.stop()
            if self._eval_worker is not None:
                self._eval_worker.close()
                self._eval_worker = None
        finally:
            close_agent(self.agent)
            if self._temporary_snapshot_dir is not None:
                shutil.rmtree(self._temporary_snapshot_dir, ignore_errors=True)
                self._temporary_snapshot_dir = None

    # ---- schedules ----------------------------------------------------------------------------------------
    def _due(self, steps: int) -> int:
        u = self.config.update
        if steps < u.start_after:
            return 0
        return ((steps - u.start_after) // u.every + 1) * u.repeats

    def _allowed_updates(self) -> int:
        if self.total_steps < self.config.update.start_after:
            return 0
        return self._due(self.total_steps) if self.config.apex.throttle else sys.maxsize

    def _may_sample(self, planned_steps: int) -> bool:
        if not self.config.apex.throttle or self.learner is None:
            return True
        return self._due(planned_steps) - self.learner.updates <= self.config.apex.max_update_lag

    # ---- weights --------------------------------------------------------------------------------------------
    def _send_weights(self, only: list[int] | None = None) -> list[Future]:
        assert self.learner is not None and self.learner.published is not None
        ref, version = self.learner.published
        targets = range(self.num_workers) if only is None else only
        futures = [self.workers[i].call("set_weights", ref, version) for i in targets]
        if only is None:
            self._sent_version = version
        return futures

    # ---- running ------------------------------------------------------------------------------------------------
    def _on_sample(self, i: int, out: dict[str, Any], payload: Future, adds: dict[Future, tuple]) -> list[Episode]:
        """Counts a worker's sample (its steps and episodes) and forwards its transitions to a shard."""
        per_worker = self.config.env.num_envs
        self.total_steps += int(out["steps"])
        self.total_frames = int(round(self.total_steps * self.frames_per_step))
        finished = [Episode(i * per_worker + int(e["env_id"]), float(e["episode_return"]), int(e["length"]),
                            bool(e["terminated"]), bool(e["truncated"]), self.total_steps, self.total_frames)
                    for e in out["episodes"]]
        self.episodes.extend(finished)
        n = int(out["transitions"])
        if n:
            j = self._pick_shard()
            # the transitions go from the worker to the shard directly (the driver never fetches them)
            fut = self.shards[j].call("add_payload", payload.as_argument(), self.produced)
            adds[fut] = (j, n, self.shards[j].incarnation, self.produced)
            self.produced += n
            self.books[j].sent += n
            self.books[j].in_flight += n
        return finished

    def _pick_shard(self) -> int:
        assert self.learner is not None
        for k in range(self.num_shards):
            j = (self._next_shard + k) % self.num_shards
            if self.learner.shard_live[j] and j not in self._dead_shards:
                self._next_shard = j + 1
                return j
        j = self._next_shard % self.num_shards   # all dead at this moment: the add fails and is counted lost
        self._next_shard = j + 1
        return j

    def run(self, num_steps: int | None = None, num_episodes: int | None = None,
            callback: Callable[[WorkerStats], Any] | None = None, callback_every: int = 1000) -> WorkerStats:
        """Acts and learns until ``num_steps`` more env steps (summed over all workers' environments) or
        ``num_episodes`` more episodes; `VectorEnvWorker.run`'s contract (the callback may stop it early).

        Sample calls are issued only while the steps asked for are not all on their way, and the run ends
        with every call answered, so counts, shards and ledger agree when it returns.
        """
        for name, value in (("num_steps", num_steps), ("num_episodes", num_episodes),
                            ("callback_every", callback_every)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer))
                                      or value <= 0):
                raise ValueError(f"ApexDriver.run: {name} must be a positive int or None; got {value!r}")
        if num_steps is None and num_episodes is None:
            raise ValueError("ApexDriver.run: give num_steps and/or num_episodes")
        self.start()
        learner = self.learner
        assert learner is not None
        a = self.config.apex
        stats = WorkerStats()
        start_steps, start, start_updates = self.total_steps, time.perf_counter(), learner.updates
        target = None if num_steps is None else start_steps + num_steps
        samples: dict[Future, tuple[int, Future, int]] = {}
        adds: dict[Future, tuple] = {}
        others: list[Future] = []
        stop = False
        next_callback = callback_every
        learner.active.set()
        try:
            while True:
                learner.check()
                if self._dead_shards:
                    self._handle_dead_shards(adds)
                if learner.published is not None and learner.published[1] > self._sent_version:
                    others.extend(self._send_weights())
                if self._next_snapshot is not None and self.total_steps >= self._next_snapshot and not adds:
                    self._snapshot()
                    self._next_snapshot = self.total_steps + a.snapshot_every
                busy = [0] * self.num_workers
                for i, _, _ in samples.values():
                    busy[i] += 1
                planned = self.total_steps + len(samples) * a.sample_steps
                for depth in range(a.calls_in_flight):   # a worker never waits for the driver to ask again
                    for i in range(self.num_workers):
                        if stop or busy[i] > depth or (target is not None and planned >= target) \
                                or not self._may_sample(planned):
                            continue
                        meta, payload = self.workers[i].call_split("sample_split", 2, a.sample_steps)
                        samples[meta] = (i, payload, self.workers[i].incarnation)
                        busy[i] += 1
                        planned += a.sample_steps
                pending = list(samples) + list(adds) + others
                if not pending:
                    if stop or (target is not None and self.total_steps >= target):
                        break
                    time.sleep(0.002)      # throttled: the learner is catching up
                    continue
                ready, _ = self.executor.wait(pending, num_returns=1, timeout=0.05)
                for fut in ready:
                    if fut in samples:
                        i, payload, incarnation = samples.pop(fut)
                        try:
                            out = fut.result(timeout=self.timeout)
                        except ActorFailure as failure:
                            if self.workers[i].incarnation == incarnation:   # else restarted already for it
                                self._restart_worker(i, failure)
                            continue
                        stats.episodes.extend(self._on_sample(i, out, payload, adds))
                        instance = out.get("instance")
                        known = self._worker_instances.setdefault(i, instance)
                        if (instance != known and instance not in self._retired
                                and self.workers[i].incarnation == incarnation):   # replaced between calls
                            self._retired.add(instance)   # its other answers on their way are this same event
                            self._restart_worker(i, ActorFailure(self.workers[i].name, "sample_split", True,
                                                                 "its process was replaced by the executor"))
                    elif fut in adds:
                        j, n, incarnation, _ = adds.pop(fut)
                        try:
                            result = fut.result(timeout=self.timeout)
                        except ActorFailure as failure:
                            self._on_shard_failure(j, incarnation, failure)
                            adds[fut] = (j, n, incarnation, None)   # counted lost when the death is handled
                            self._handle_dead_shards(adds)
                            continue
                        previous = self.books[j].last.get("instance")
                        if previous is not None and result.get("instance") != previous:
                            # the shard was replaced between calls (no call failed): what it held is gone
                            self._on_shard_failure(j, incarnation, ActorFailure(
                                self.shards[j].name, "add_payload", True, "its process was replaced by the executor"))
                            adds[fut] = (j, n, incarnation, None)
                            self._handle_dead_shards(adds)
                            continue
                        self.books[j].in_flight -= n
                        self.books[j].last = result
                    else:
                        others.remove(fut)
                        try:
                            fut.result(timeout=self.timeout)
                        except ActorFailure:
                            pass   # a worker that died: its next sample call fails and restarts it
                stats.steps = self.total_steps - start_steps
                done = ((target is not None and self.total_steps >= target)
                        or (num_episodes is not None and len(stats.episodes) >= num_episodes))
                if callback is not None and not stop and (stats.steps >= next_callback or done):
                    next_callback = (stats.steps // callback_every + 1) * callback_every
                    self._fill(stats, start, start_updates)
                    if callback(stats) is False:
                        stats.stopped_by_callback = True
                        stop = True
                if done:
                    stop = True
        finally:
            learner.pause()
        if learner.published is not None and learner.published[1] > self._sent_version:
            for fut in self._send_weights():   # the workers leave with the last weights published
                try:
                    fut.result(timeout=self.timeout)
                except ActorFailure:
                    pass   # a worker that died: its next sample call fails and restarts it
        self._fill(stats, start, start_updates)
        return stats

    def _fill(self, stats: WorkerStats, start: float, start_updates: int) -> None:
        stats.seconds = time.perf_counter() - start
        stats.frames = int(round(stats.steps * self.frames_per_step))
        stats.steps_per_s = stats.steps / stats.seconds if stats.seconds > 0 else 0.0
        stats.frames_per_s = stats.frames / stats.seconds if stats.seconds > 0 else 0.0
        stats.mean_return_100 = self.mean_return(100)
        stats.total_steps, stats.total_frames = self.total_steps, self.total_frames
        assert self.learner is not None
        stats.num_updates = self.learner.updates - start_updates
        stats.last_loss = self.learner.last_loss

    # ---- what the Trainer reads ------------------------------------------------------------------------------
    @property
    def total_updates(self) -> int:
        return 0 if self.learner is None else self.learner.updates

    @property
    def last_loss(self) -> float | None:
        return None if self.learner is None else self.learner.last_loss

    @property
    def update_means(self) -> UpdateMeans:
        """The learner's update means since the Trainer's last row (nothing before the learner exists)."""
        return UpdateMeans() if self.learner is None else self.learner.update_means

    @property
    def started(self) -> bool:
        """Whether `start` made the shards and workers."""
        return self._started

    def mean_return(self, last: int = 100) -> float:
        """The mean return of the last ``last`` finished episodes of all workers (NaN before the first)."""
        return mean_episode_return(self.episodes, last)

    def evaluate(self, num_episodes: int, num_envs: int | None = None, seed: int | None = None,
                 max_steps: int | None = None) -> list[float]:
        """Greedy returns of the learner's network (`VectorEnvWorker.evaluate` on the driver; learning waits)."""
        if self._eval_worker is None:
            self._eval_worker = VectorEnvWorker.for_agent(self.agent, num_envs=1, seed=self.seed, observe=False,
                                                          update=False)
        lock = self.learner.lock if self.learner is not None else threading.Lock()
        with lock:
            return self._eval_worker.evaluate(num_episodes, num_envs=num_envs,
                                              seed=derive_seed(self.seed, "eval_screen") if seed is None else seed,
                                              max_steps=max_steps)

    # ---- checkpoints -------------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Counters, episodes, the ledger's books and the failures (plain Python values)."""
        return {"num_envs": self.num_envs, "total_steps": self.total_steps, "total_frames": self.total_frames,
                "total_updates": self.total_updates, "last_loss": self.last_loss, "resets": self.resets,
                "episodes": [dataclasses.asdict(e) for e in self.episodes], "produced": self.produced,
                "learner_updates": self.total_updates,
                "records_learned": 0 if self.learner is None else self.learner.records_learned,
                "books": [dataclasses.asdict(b) for b in self.books],
                "worker_failures": self.worker_failures, "shard_failures": self.shard_failures,
                "workers": self.num_workers, "shards": self.num_shards}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores `state_dict` output before `start` (workers start fresh episodes).

        Raises:
            ValueError: naming a missing key or a topology that differs.
        """
        missing = [k for k in ("total_steps", "total_frames", "episodes", "produced", "books", "shards")
                   if k not in state]
        if missing:
            raise ValueError(f"ApexDriver.load_state_dict: missing keys {missing}")
        if int(state["shards"]) != self.num_shards:
            raise ValueError(f"ApexDriver.load_state_dict: the run had {state['shards']} shards; this driver has "
                             f"{self.num_shards} (--shards must stay)")
        if self._started:
            raise ValueError("ApexDriver.load_state_dict: call it before the first run")
        self.total_steps, self.total_frames = int(state["total_steps"]), int(state["total_frames"])
        self.episodes = [Episode(**e) for e in state["episodes"]]
        self.produced = int(state["produced"])
        self.books = [ShardBook(**b) for b in state["books"]]
        for b in self.books:
            b.in_flight = 0
        self.worker_failures = list(state.get("worker_failures", []))
        self.shard_failures = list(state.get("shard_failures", []))
        self.resets = int(state.get("resets", 1)) + 1
        self._restore_state = dict(state)
