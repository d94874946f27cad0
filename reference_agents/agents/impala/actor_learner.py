"""IMPALA's actor-learner split over any transport: the actor body, and the learner as a `Trainer` worker.

Actors step their environments with the policy they last read from the weight store and put each
rollout (tagged with actor, incarnation and sequence number) and each finished episode into queues;
the learner takes batches of rollouts (a staging thread takes the next batch while the current one
trains), updates, and publishes its weights every ``publish_every`` updates. `ActorLearnerWorker` has
the interface of a `VectorEnvWorker` that `Trainer` drives: its env steps are the steps of the rollouts
that reached the learner, its episodes those the actors finished, its evaluation greedy episodes on the
learner's own environments. Nothing here imports a distributed engine: the executor passed in
(`harness.execution.tf_dist.TFActorLearnerExecutor`, or one with the same methods) owns processes,
servers and the transport.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import queue
import sys
import threading
import time
from typing import Any, Callable, TextIO

import numpy as np

from harness.execution.transport import OutcomeUnknown, QueueClosed, RecordSpec
from harness.seeds import derive_seed
from reference_agents.agents.base import acting_config
from reference_agents.workers import Episode, VectorEnvWorker, WorkerStats
from reference_agents.workers.results import UpdateMeans

EPISODE_SPEC: RecordSpec = {"actor": ("int64", ()), "return": ("float64", ()), "length": ("int64", ()),
                            "terminated": ("bool", ()), "truncated": ("bool", ())}
#: A rollout's tags: its actor, the actor's incarnation (restarts), its sequence number, and the version of the
#: published weights it acted with (the learner reads its policy lag from it).
TAG_FIELDS = ("actor", "incarnation", "tag", "policy_version")


def rollout_spec(agent: Any) -> RecordSpec:
    """The record spec of one IMPALA rollout of ``agent`` (``T`` steps of its ``num_envs`` environments)."""
    t, n = agent.config.rollout.length, agent.config.env.num_envs
    state = agent.state_space
    spec: RecordSpec = {"rollout_states": (state.dtype.name, (t + 1, n, *state.shape)), "actions": ("int64", (t, n)),
                        "rewards": ("float32", (t, n)), "discounts": ("float32", (t, n)),
                        "behaviour_logits": ("float32", (t, n, agent.num_actions))}
    if agent.recurrent:
        spec.update(initial_h=("float32", (n, agent.units)), initial_c=("float32", (n, agent.units)),
                    resets=("bool", (t + 1, n)))
    spec.update({k: ("int64", ()) for k in TAG_FIELDS})
    return spec


def weight_spec(agent: Any) -> RecordSpec:
    """The record spec of ``agent``'s policy weights."""
    return {k: (v.dtype.name, v.shape) for k, v in agent.get_weights().items()}


def actor_learner_queues(rollouts: RecordSpec, episodes: RecordSpec, actors: int) -> dict[str, tuple[RecordSpec, int]]:
    """The queues of an actor-learner run with ``actors`` actors: rollouts (4 in flight per actor) and
    finished episodes (room for 100,000)."""
    return {"rollouts": (rollouts, 4 * actors), "episodes": (episodes, 100_000)}


def to_record(rollout: dict[str, Any], actor: int, incarnation: int, policy_version: int = 0) -> dict[str, Any]:
    """A rollout of `IMPALAAgent` as a flat record (the recurrent state split into two arrays), tagged with its
    actor, incarnation and the weights version it acted with."""
    record = {k: v for k, v in rollout.items() if k != "initial_state"}
    if "initial_state" in rollout:
        record["initial_h"], record["initial_c"] = rollout["initial_state"]
    record.update(actor=actor, incarnation=incarnation, policy_version=policy_version)
    return record


def from_records(batch: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """Stacked records ``[k, ...]`` back into ``k`` rollouts as `IMPALAAgent.update` takes them."""
    out = []
    for i in range(batch["tag"].shape[0]):
        rollout = {k: v[i] for k, v in batch.items() if k not in ("initial_h", "initial_c")}
        if "initial_h" in batch:
            rollout["initial_state"] = (batch["initial_h"][i], batch["initial_c"][i])
        out.append(rollout)
    return out


def impala_actor(transport: Any, index: int, incarnation: int, config: dict[str, Any], backend: str, seed: int) -> None:
    """An actor process's body: act with the latest published weights, ship rollouts and episodes.

    Returns when the learner closes the queues (or is gone).
    """
    from reference_agents.agents import IMPALAAgent

    agent = IMPALAAgent(config, backend=backend, seed=derive_seed(seed, "actor", index, incarnation))
    worker = VectorEnvWorker.for_agent(agent, seed=agent.seed, update=False)
    rollouts, episodes, weights = transport.queues["rollouts"], transport.queues["episodes"], transport.weights
    steps = agent.config.rollout.length * worker.num_envs
    version = 0
    try:
        while True:
            if weights.version() > version:
                version, published = weights.read()
                agent.set_weights(published)
            if version == 0:  # the learner publishes before it starts actors; wait for the first weights
                time.sleep(0.05)
                continue
            stats = worker.run(num_steps=steps)
            for ep in stats.episodes:
                episodes.put({"actor": index, "return": ep.episode_return, "length": ep.length,
                              "terminated": ep.terminated, "truncated": ep.truncated})
            while agent.outbox:
                rollouts.put(to_record(agent.outbox.popleft(), index, incarnation, version))
    except QueueClosed:
        return
    finally:
        worker.close()


class ActorLearnerWorker:
    """The learner of an actor-learner run, with the `VectorEnvWorker` interface that `Trainer` drives.

    Args:
        agent: the learner's `IMPALAAgent` (its weights are what actors act with).
        executor_factory: ``fn(rollout_spec, episode_spec, weight_spec) -> executor``: makes the executor
            that runs the actors and holds the queues ``rollouts`` and ``episodes`` and the weight store
            (e.g. a `TFActorLearnerExecutor`).
        publish_every: publish the weights after this many updates (0: never, for executors whose actors
            hold no policy).
        stream: where actor failures are reported (default ``sys.stderr``).
        staged: batches the staging thread takes ahead of the one training.
        actor_backend: the backend the actors act on (default: the config's ``actor_backend``, else the
            learner agent's): policy weights are the same arrays on either backend, so a TensorFlow learner
            can feed PyTorch actors.
    """

    # The learner's agent observes nothing (its actors do), so its step counter does not follow this worker's:
    # like a worker that folds transitions itself (`Trainer.resume` checks the two agree otherwise).
    folds = True
    explore = True

    def __init__(self, agent: Any, executor_factory: Callable[..., Any], publish_every: int = 1,
                 stream: TextIO | None = None, staged: int = 1, actor_backend: str | None = None) -> None:
        self.agent = agent
        self.actor_backend = actor_backend or agent.config.actor_backend or agent.backend
        self.env_id = agent.config.env.id
        self.num_envs = agent.config.env.num_envs
        self.seed = agent.seed
        # the learner's own environments, for greedy evaluation (and the env's frames per step)
        self._eval_worker = VectorEnvWorker.for_agent(agent, num_envs=1, update=False, observe=False)
        self.frames_per_step = self._eval_worker.frames_per_step
        self.publish_every = int(publish_every)
        self.stream = stream if stream is not None else sys.stderr
        self.total_steps = self.total_frames = self.total_updates = 0
        self.last_loss: float | None = None
        self.update_means = UpdateMeans()   # the learning diagnostics of the Trainer's next metric row
        # the learner's update count at each weights version published (what a rollout's policy lag is read from)
        self._published_at: dict[int, int] = {}
        self.resets = 1
        self.episodes: list[Episode] = []
        self.received: collections.Counter = collections.Counter()   # rollouts learned per actor
        self._next_tag: dict[tuple[int, int], int] = {}
        # A step whose outcome the transport lost (`OutcomeUnknown`) is reported and counted, not fatal: a take
        # that may have run lost its rollouts (found later as a gap in an actor's tags, counted in
        # `lost_rollouts`); `transport_faults` lists every such step.
        self.lost_rollouts = 0
        self.transport_faults: list[dict[str, Any]] = []
        self._may_be_lost = 0
        self._fault_lock = threading.Lock()
        self._fault_messages: list[str] = []
        self.executor = self._make_executor(executor_factory)
        self._staged: queue.Queue = queue.Queue(max(1, int(staged)))
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._stager: threading.Thread | None = None

    def _make_executor(self, executor_factory: Callable[..., Any]) -> Any:
        """The executor, with the learner's weights published before any actor starts."""
        executor = executor_factory(rollout_spec(self.agent), EPISODE_SPEC, weight_spec(self.agent))
        self._published(executor.weights.publish(self.agent.get_weights()))
        return executor

    def _published(self, version: int) -> None:
        """Notes the update count at weights ``version`` (versions count up: the last 1,000 are kept)."""
        self._published_at[int(version)] = self.total_updates
        self._published_at.pop(int(version) - 1000, None)

    def _policy_lag(self, batch: list[dict[str, Any]]) -> float | None:
        """The mean over ``batch`` of the updates the learner made after publishing the weights each rollout
        acted with (None when no rollout's version is known: say, a publication whose outcome was unknown)."""
        lags = [self.total_updates - self._published_at[v] for v in
                (int(r.get("policy_version", -1)) for r in batch) if v in self._published_at]
        return float(np.mean(lags)) if lags else None

    # ---- actors and the staging thread -----------------------------------------------------------------
    def start(self) -> None:
        """Starts the actors and the staging thread (`run` does it on its first call)."""
        cfg = acting_config(self.agent.config.model_dump(by_alias=True))  # the update's replicas: the learner's
        self.executor.start_actors(impala_actor, cfg, self.actor_backend, self.agent.seed)
        self._stager = threading.Thread(target=self._stage, name="staging", daemon=True)
        self._stager.start()

    def _stage(self) -> None:
        k = self.agent.config.rollout.batch_size
        rollouts = self.executor.queues["rollouts"]
        try:
            while not self._stop.is_set():
                try:
                    batch = from_records(rollouts.take(k, timeout=1.0))
                except TimeoutError:
                    continue
                except OutcomeUnknown as exc:
                    with self._fault_lock:
                        self._may_be_lost += k   # before any later batch is staged: _check_order sees it first
                    self._transport_fault("take", f"a take of {k} rollouts may have run: its rollouts are lost if "
                                                  f"it did (a gap in their actors' tags will show)", exc)
                    continue
                while not self._stop.is_set():
                    try:
                        self._staged.put(batch, timeout=0.5)
                        break
                    except queue.Full:
                        continue
        except QueueClosed:
            return
        except BaseException as exc:  # surfaced by run()
            self._error = exc

    def _transport_fault(self, step: str, consequence: str, exc: OutcomeUnknown) -> None:
        with self._fault_lock:
            self.transport_faults.append({"step": step, "at_step": self.total_steps, "error": str(exc)})
            self._fault_messages.append(f"{step} at env step {self.total_steps:,}: {exc}; {consequence}; "
                                        f"the run goes on")

    def _next_batch(self) -> list[dict[str, Any]] | None:
        """The next batch of rollouts the staging thread took (None after a second without one)."""
        try:
            return self._staged.get(timeout=1.0)
        except queue.Empty:
            return None

    def _update(self, batch: list[dict[str, Any]]) -> dict[str, Any]:
        return self.agent.update(batch)

    def _check_order(self, batch: list[dict[str, Any]]) -> None:
        for rollout in batch:
            key = (int(rollout["actor"]), int(rollout["incarnation"]))
            tag, want = int(rollout["tag"]), self._next_tag.get(key, 0)
            if tag > want:
                with self._fault_lock:   # a take whose outcome was unknown did run: its rollouts are gone
                    if tag - want <= self._may_be_lost:
                        self._may_be_lost -= tag - want
                        self.lost_rollouts += tag - want
                        self._fault_messages.append(f"rollouts {want}-{tag - 1} of actor {key[0]} (incarnation "
                                                    f"{key[1]}) were in a take whose outcome was unknown: "
                                                    f"{tag - want} lost")
                        want = tag
            if tag != want:
                raise RuntimeError(f"ActorLearnerWorker: rollout {tag} of actor {key[0]} (incarnation {key[1]}) "
                                   f"arrived where {want} was due: lost or reordered")
            self._next_tag[key] = tag + 1
            self.received[key[0]] += 1

    def _drain_episodes(self) -> list[Episode]:
        q = self.executor.queues["episodes"]
        waiting = q.size()
        if not waiting:
            return []
        try:
            got = q.take(waiting, timeout=5.0)
        except OutcomeUnknown as exc:
            self._transport_fault("episodes take", f"up to {waiting} finished episodes' returns are lost", exc)
            return []
        new = [Episode(int(a), float(r), int(n), bool(te), bool(tr), self.total_steps, self.total_frames)
               for a, r, n, te, tr in zip(got["actor"], got["return"], got["length"], got["terminated"],
                                          got["truncated"])]
        self.episodes.extend(new)
        return new

    # ---- the VectorEnvWorker interface ---------------------------------------------------------------------
    def run(self, num_steps: int | None = None, num_episodes: int | None = None,
            callback: Callable[[WorkerStats], Any] | None = None, callback_every: int = 1000) -> WorkerStats:
        """Learns until ``num_steps`` more env steps (of rollouts learned from) or ``num_episodes`` more
        episodes; reports and restarts crashed actors on the way. ``callback(stats)`` is called every
        ``callback_every`` env steps and after every second without rollouts (no actor has joined yet, or
        none is left), so that a time limit or Ctrl-C can stop a learner that waits; returning False stops."""
        if num_steps is None and num_episodes is None:
            raise ValueError("ActorLearnerWorker.run: give num_steps or num_episodes")
        if self._stager is None:
            self.start()
        stats = WorkerStats()
        start, first_step, first_ep = time.perf_counter(), self.total_steps, len(self.episodes)
        next_callback = self.total_steps + callback_every
        per_rollout = self.agent.config.rollout.length * self.num_envs

        def stop_asked() -> bool:
            self._fill(stats, start, first_step)
            stats.stopped_by_callback = callback is not None and callback(stats) is False
            return stats.stopped_by_callback

        while ((num_steps is None or self.total_steps - first_step < num_steps)
               and (num_episodes is None or len(self.episodes) - first_ep < num_episodes)):
            for report in self.executor.poll():
                self.stream.write(f"spacegraph: {report.message}\n")
            self._write_fault_messages()
            if self._error is not None:
                raise RuntimeError(f"ActorLearnerWorker: the staging thread failed: {self._error!r}") from self._error
            batch = self._next_batch()
            if batch is None:   # a second without rollouts
                if stop_asked():
                    break
                continue
            self._check_order(batch)
            lag = self._policy_lag(batch)
            metrics = self._update(batch)
            self.update_means.add({**metrics, "policy_lag": lag} if lag is not None else metrics)
            self.total_updates += 1
            self.last_loss = metrics["loss"]
            stats.num_updates += 1
            stats.last_loss = metrics["loss"]
            if self.publish_every and self.total_updates % self.publish_every == 0:
                try:
                    self._published(self.executor.weights.publish(self.agent.get_weights()))
                except OutcomeUnknown as exc:   # the next publication writes the buffer its version calls for
                    self._transport_fault("publish", "the actors may read the previous weights until the next "
                                                     "publication", exc)
            self.total_steps += per_rollout * len(batch)
            self.total_frames = int(round(self.total_steps * self.frames_per_step))
            stats.episodes.extend(self._drain_episodes())
            if callback is not None and self.total_steps >= next_callback:
                next_callback = self.total_steps + callback_every
                if stop_asked():
                    break
        self._write_fault_messages()
        self._fill(stats, start, first_step)
        return stats

    def _write_fault_messages(self) -> None:
        with self._fault_lock:
            messages, self._fault_messages = self._fault_messages, []
        for message in messages:
            self.stream.write(f"spacegraph: learner: {message}\n")
        if messages:
            self.stream.flush()

    def _fill(self, stats: WorkerStats, start: float, first_step: int) -> None:
        stats.steps = self.total_steps - first_step
        stats.frames = int(round(stats.steps * self.frames_per_step))
        stats.seconds = time.perf_counter() - start
        stats.steps_per_s = stats.steps / stats.seconds if stats.seconds > 0 else 0.0
        stats.frames_per_s = stats.frames / stats.seconds if stats.seconds > 0 else 0.0
        stats.mean_return_100 = self.mean_return(100)
        stats.total_steps, stats.total_frames = self.total_steps, self.total_frames

    def mean_return(self, last: int = 100) -> float:
        """The mean return of the last ``last`` episodes the actors finished (NaN before the first)."""
        recent = self.episodes[-last:]
        return float(np.mean([e.episode_return for e in recent])) if recent else math.nan

    def evaluate(self, num_episodes: int, num_envs: int | None = None, seed: int | None = None,
                 max_steps: int | None = None) -> list[float]:
        """Greedy returns of the learner's policy on the learner's own environments (`VectorEnvWorker.evaluate`)."""
        return self._eval_worker.evaluate(num_episodes, num_envs=num_envs,
                                          seed=derive_seed(self.seed, "eval_screen") if seed is None else seed,
                                          max_steps=max_steps)

    def state_dict(self) -> dict[str, Any]:
        """Counters and episodes (as `VectorEnvWorker.state_dict`), and the rollouts learned per actor."""
        return {"num_envs": self.num_envs, "total_steps": self.total_steps, "total_frames": self.total_frames,
                "total_updates": self.total_updates, "last_loss": self.last_loss, "resets": self.resets,
                "episodes": [dataclasses.asdict(e) for e in self.episodes],
                "received": {str(k): v for k, v in self.received.items()}, "lost_rollouts": self.lost_rollouts,
                "transport_faults": list(self.transport_faults)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores `state_dict`'s counters and episodes (actors start afresh: tags begin at 0 again)."""
        self.total_steps, self.total_frames = int(state["total_steps"]), int(state["total_frames"])
        self.total_updates, self.last_loss = int(state["total_updates"]), state["last_loss"]
        # the versions published so far (before the restore, by this worker's executor) count from the restored updates
        self._published_at = {v: self.total_updates for v in self._published_at}
        self.episodes = [Episode(**e) for e in state["episodes"]]
        self.received = collections.Counter({int(k): v for k, v in state.get("received", {}).items()})
        self.lost_rollouts = int(state.get("lost_rollouts", 0))
        self.transport_faults = list(state.get("transport_faults", []))

    def close(self) -> None:
        """Stops the staging thread and the actors (no process left), closes the evaluation environments."""
        self._stop.set()
        self.executor.shutdown()
        if self._stager is not None:
            self._stager.join(10)
        self._eval_worker.close()
