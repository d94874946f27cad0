"""Central batched inference (SEED RL style) for IMPALA: actors only step environments; the learner acts.

An actor sends each lockstep step of its ``N`` environments as one request record (the observations
to act on, and the rewards, terminations and final observations of the step before) and waits for its
actions. Only the learner holds the policy: an inference thread gathers requests from all actors into one
batch (up to ``max_batch`` requests, waiting at most ``timeout_ms`` after the first), acts on it in one
call with each environment's recurrent state, answers every actor, and cuts each actor's steps into
rollouts that the learning loop (`ActorLearnerWorker.run`) trains on. No weights are ever sent to actors.
Actors are independent of one another: a batch never waits for a particular actor, so one that dies or
disconnects is simply absent from the next batches; when it comes back (a new incarnation, first request
flagged) its environments start afresh on the learner too.

Inference and learning overlap: no lock is held around either's work. The inference thread acts with an
inference copy of the policy (a second agent built from the learner's config, with a local strategy),
which only that thread touches. After every update the learning loop publishes a weight version: a
NumPy copy of the learner's policy weights taken between updates, handed over as one ``(version, weights)``
reference. Before each batch the inference thread loads the newest version into its copy if it holds an
older one, so a batch always acts with one complete version (never a mix of two) while the next update
runs. Every step records the version that acted (a rollout's ``policy_versions``, ``[T]``), its
behaviour logits are that version's, and V-trace corrects for the difference as in IMPALA's
actor-learner mode; `CentralInferenceWorker.policy_lag` counts the rollouts learned at each lag (updates
between the learner's version and the rollout's oldest acting version). Acting runs at most ``max_waiting``
finished rollouts ahead of learning: at that many the inference thread holds back until the learner takes a
batch. ``overlap=False`` keeps the former scheme (no copy: one lock for inference and updates).

The queues (``requests`` and one ``actions-<i>`` per actor) come from any actor-learner executor
(in-process threads, distributed TF, Ray).
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from typing import Any, Callable

import numpy as np

from harness.execution.grpc_protocol import RemoteBody
from harness.execution.transport import QueueClosed, RecordSpec
from harness.seeds import derive_seed
from reference_agents.agents.base import acting_config
from reference_agents.agents.impala.rollouts import RolloutBuilder
from reference_agents.agents.impala.actor_learner import ActorLearnerWorker
from reference_agents.workers import Episode
from reference_agents.workers.native_envs import env_kwargs_of, make_vector_env


def request_spec(agent: Any) -> RecordSpec:
    """One actor step: ``obs`` to act on, and ``reward``/``terminated``/``truncated``/``final`` of the step
    before (``first``: the actor's first request, nothing before it)."""
    n, state = agent.config.env.num_envs, agent.state_space
    obs = (state.dtype.name, (n, *state.shape))
    return {"actor": ("int64", ()), "incarnation": ("int64", ()), "seq": ("int64", ()), "first": ("bool", ()),
            "obs": obs, "final": obs, "reward": ("float32", (n,)), "terminated": ("bool", (n,)),
            "truncated": ("bool", (n,))}


def response_spec(agent: Any) -> RecordSpec:
    """The answer to one request: its ``seq``, the asking actor's ``incarnation`` and the ``N`` actions."""
    return {"seq": ("int64", ()), "incarnation": ("int64", ()), "actions": ("int64", (agent.config.env.num_envs,))}


def central_queues(agent: Any, actors: int) -> dict[str, tuple[RecordSpec, int]]:
    """The queues of a central-inference run with ``actors`` actors."""
    queues = {"requests": (request_spec(agent), 4 * actors)}
    queues.update({f"actions-{i}": (response_spec(agent), 2) for i in range(actors)})
    return queues


def env_actor(transport: Any, index: int, incarnation: int, env: dict[str, Any], seed: int) -> None:
    """An actor's body: step ``env`` (``{id, num_envs, kwargs, atari, vectorizer}``) with the actions the learner
    sends."""
    envs = make_vector_env(env["id"], env["num_envs"], env_kwargs_of(env) or None)
    requests, answers = transport.queues["requests"], transport.queues[f"actions-{index}"]
    n = envs.num_envs
    act_on = envs.reset(seed=derive_seed(seed, "actor", index, incarnation))
    final, reward = act_on, np.zeros(n, np.float32)
    terminated = truncated = np.zeros(n, bool)
    try:
        for seq in range(2 ** 62):
            requests.put({"actor": index, "incarnation": incarnation, "seq": seq, "first": seq == 0, "obs": act_on,
                          "final": final, "reward": reward, "terminated": terminated, "truncated": truncated})
            answer = answers.take(1)
            while int(answer["incarnation"][0]) != incarnation:  # to a request of the killed incarnation before
                answer = answers.take(1)
            if int(answer["seq"][0]) != seq:
                raise RuntimeError(f"actor {index}: answer {int(answer['seq'][0])} to request {seq}")
            final, reward, terminated, truncated, _, act_on = envs.step(answer["actions"][0])
    except QueueClosed:
        return
    finally:
        envs.close()


def check_env_actor_args(args: list) -> tuple[dict[str, Any], int]:
    """`env_actor`'s arguments ``[env, seed]`` as they come over a socket, checked as a local config's ``env``
    section is (`EnvConfig`), before the actor makes anything.

    Raises:
        ValueError: naming what is wrong; also for a ``module:Name`` id, which would make the actor import
            ``module`` on the learner's word (such environments run with spawned actors only).
    """
    from reference_agents.agents.config import ConfigError, EnvConfig, load_agent_config

    if not isinstance(args, list) or len(args) != 2:
        raise ValueError(f"expected [env, seed]; got {str(args)[:200]}")
    env, seed = args
    if type(seed) is not int or not 0 <= seed < 2 ** 63:
        raise ValueError(f"seed must be an int in [0, 2**63); got {str(seed)[:50]}")
    if not isinstance(env, dict):
        raise ValueError(f"the env section must be a mapping; got {str(env)[:200]}")
    try:
        config, _ = load_agent_config(env, model=EnvConfig)
    except ConfigError as exc:
        raise ValueError("the env section " + str(exc).partition("\n")[2].strip()) from None
    if ":" in config.id:
        raise ValueError(f"env id {config.id!r} has the module:Name form, which makes gymnasium import the module: "
                         f"an actor started elsewhere does not import what the learner names")
    return config.model_dump(), seed


#: The actor bodies an actor started elsewhere (``spacegraph actor``) runs when the learner names them.
REMOTE_BODIES = {"central-inference": RemoteBody(env_actor, check_env_actor_args)}


def gather_requests(requests: Any, max_batch: int, timeout: float, clock: Callable[[], float] = time.monotonic,
                    sleep: Callable[[float], None] = time.sleep, poll: float = 0.0002,
                    first_timeout: float = 1.0) -> tuple[dict[str, np.ndarray], float] | None:
    """One inference batch: the first request (waiting up to ``first_timeout`` s for it), then what else comes
    until the batch holds ``max_batch`` requests or ``timeout`` seconds of ``clock`` have passed since the first.

    Args:
        requests: the request queue (``take(n, timeout=None)`` and ``size()``, as the transports' queues).
        max_batch: requests per batch at most.
        timeout: how long the batch waits for more requests after its first (seconds of ``clock``).
        clock: the clock the window is measured on (tests pass a fake one).
        sleep: how the gathering waits ``poll`` seconds between looks at an empty queue.
        poll: the wait between looks.
        first_timeout: how long to wait for the first request (the queue's own wait).

    Returns:
        ``(batch, waited)``: the requests concatenated field by field and the seconds of ``clock`` the batch
        waited after its first request; None when no request came within ``first_timeout``.
    """
    try:
        batch = [requests.take(1, timeout=first_timeout)]
    except TimeoutError:
        return None
    first = clock()
    deadline, count = first + timeout, 1
    while count < max_batch:
        waiting = requests.size()
        if waiting:
            batch.append(requests.take(min(waiting, max_batch - count)))
            count += len(batch[-1]["seq"])
        elif clock() >= deadline:
            break
        else:
            sleep(poll)
    return {k: np.concatenate([b[k] for b in batch]) for k in batch[0]}, clock() - first


class _ActorSlot:
    """The learner's side of one actor: its environments' recurrent state, the step in flight, rollouts."""

    def __init__(self, agent: Any, incarnation: int) -> None:
        n, units = agent.config.env.num_envs, agent.units or 0
        self.incarnation = incarnation
        self.state = (np.zeros((n, units), np.float32), np.zeros((n, units), np.float32))
        self.builder = RolloutBuilder(agent.config.rollout.length, agent.recurrent)
        self.starts = np.ones(n, bool)
        self.last: dict[str, Any] | None = None
        self.returns, self.lengths = np.zeros(n), np.zeros(n, np.int64)
        self.next_seq = 0
        self.versions: list[int] = []  # the weight version that acted at each step of the rollout being cut


class CentralInferenceWorker(ActorLearnerWorker):
    """The learner of a central-inference run, with the `Trainer` worker interface.

    The inference thread acts with `inference_agent`, a copy of the policy that only it touches; `publish`
    (after every update, and at `start`) hands it the learner's weights as the next version.

    Args:
        agent: the learner's `IMPALAAgent` (the policy that learns; the inference copy gets its weights).
        executor_factory: ``fn(queues) -> executor`` (``queues``: `central_queues`), e.g.
            ``lambda q: TFActorLearnerExecutor(actors, q, {})``.
        actors: how many actors the executor runs.
        max_batch: requests (actors) per inference call at most.
        timeout_ms: how long a batch waits for more requests after its first.
        max_waiting: finished rollouts that may wait for the learner (default ``2 * rollout.batch_size``: the
            next batch and one more); at that many the inference thread answers no actor until the learner takes
            a batch, so acting never runs ahead of learning by more (nor the policy lag grow without bound).
        overlap: False: no inference copy (no second policy in memory); inference acts with the learner's own
            policy under one lock with the updates, so every update stalls every actor (as before the two
            overlapped; `spacegraph.reports.central_inference` measures one against the other).

    Raises:
        ValueError: for a ``max_waiting`` below ``rollout.batch_size`` (the learner would wait for a batch
            that inference holds back).
    """

    def __init__(self, agent: Any, executor_factory: Callable[..., Any], actors: int, max_batch: int | None = None,
                 timeout_ms: float = 2.0, max_waiting: int | None = None, overlap: bool = True,
                 **kwargs: Any) -> None:
        self.actors, self.max_batch = int(actors), int(max_batch or actors)
        k = agent.config.rollout.batch_size
        self.max_waiting = int(2 * k if max_waiting is None else max_waiting)
        if self.max_waiting < k:
            raise ValueError(f"CentralInferenceWorker: max_waiting must be at least rollout.batch_size ({k}), or the "
                             f"learner waits for a batch that inference holds back; got {max_waiting!r}")
        self.held_back = 0  # times the inference thread waited for the learner to take rollouts
        self._room = threading.Condition()  # the learner took rollouts (a signal only: held by neither's work)
        self.timeout = float(timeout_ms) / 1000.0
        self.batch_sizes: collections.Counter = collections.Counter()   # achieved inference batches (requests)
        self.answered: collections.Counter = collections.Counter()      # requests answered per actor
        self.policy_lag: collections.Counter = collections.Counter()    # rollouts learned per lag (updates)
        self.max_wait = 0.0  # the longest a batch waited for more requests after its first (seconds)
        self._slots: dict[int, _ActorSlot] = {}
        self._finished: collections.deque = collections.deque()
        self._rollouts: collections.deque = collections.deque()
        self.overlap = bool(overlap)
        self.inference_agent = agent if not overlap else type(agent)(
            acting_config(agent.config.model_dump(by_alias=True)), backend=agent.backend, seed=agent.seed,
            state_space=agent.state_space, action_space=agent.action_space, device=agent.device)
        self._policy_lock: Any = contextlib.nullcontext() if overlap else threading.Lock()
        self._loaded: dict[str, np.ndarray] | None = None  # the published weights the inference copy holds
        super().__init__(agent, executor_factory, publish_every=0, **kwargs)
        self._publish(self.total_updates)

    def policy_lag_mean(self) -> float | None:
        """Updates between the learner's weights and a learned rollout's oldest acting version, on average over
        the rollouts learned so far (None before the first update)."""
        count = sum(self.policy_lag.values())
        return sum(k * v for k, v in self.policy_lag.items()) / count if count else None

    def publish(self) -> None:
        """Hands the learner's current policy weights to the inference thread (a copy taken now, in the calling
        thread, while no update runs), as version `total_updates`. The learning loop publishes after every
        update and `start` before the first; call it after setting the learner's weights from outside."""
        self._publish(self.total_updates)

    def _publish(self, version: int) -> None:
        # one reference: never half a version (without overlap the version is the learner's policy itself)
        self._published = (version, self.agent.get_weights() if self.overlap else None)

    def mean_batch(self) -> float | None:
        """Actors per batched inference call so far, on average (None before the first call)."""
        calls = sum(self.batch_sizes.values())
        return sum(k * v for k, v in self.batch_sizes.items()) / calls if calls else None

    def _make_executor(self, executor_factory: Callable[..., Any]) -> Any:
        return executor_factory(central_queues(self.agent, self.actors))

    def start(self) -> None:
        """Publishes the learner's weights, then starts the actors and the inference thread."""
        self.publish()
        env = self.agent.config.env
        self.executor.start_actors(env_actor, {"id": env.id, "num_envs": env.num_envs, "kwargs": env.kwargs,
                                               "atari": env.atari, "vectorizer": env.vectorizer}, self.agent.seed)
        self._stager = threading.Thread(target=self._serve, name="inference", daemon=True)
        self._stager.start()

    # ---- the inference thread ----------------------------------------------------------------------------
    def _gather(self) -> dict[str, np.ndarray] | None:
        gathered = gather_requests(self.executor.queues["requests"], self.max_batch, self.timeout)
        if gathered is None:
            return None
        batch, waited = gathered
        self.max_wait = max(self.max_wait, waited)
        return batch

    def _serve(self) -> None:
        try:
            while not self._stop.is_set():
                if len(self._rollouts) >= self.max_waiting:  # acting ahead of learning: wait for the learner
                    self.held_back += 1
                    with self._room:
                        self._room.wait_for(self._has_room, timeout=1.0)
                    continue
                batch = self._gather()
                if batch is not None:
                    self._answer(batch)
        except QueueClosed as exc:
            if not self._stop.is_set():  # a queue closed under a running learner: run() must not wait forever
                self._error = RuntimeError(f"central inference: a queue closed while the run went on: {exc}")
        except BaseException as exc:  # surfaced by run()
            self._error = exc

    def _has_room(self) -> bool:
        return len(self._rollouts) < self.max_waiting or self._stop.is_set()

    def _complete(self, slot: _ActorSlot, index: int, reward: np.ndarray, terminated: np.ndarray,
                  truncated: np.ndarray, final: np.ndarray) -> None:
        """The step in flight of one actor, now that its outcome came: into the actor's rollout."""
        last, agent = slot.last, self.inference_agent
        raw, reward = reward, reward.astype(np.float32).copy()
        cut = truncated & ~terminated
        if cut.any():  # a time-limit cut bootstraps in the reward (as IMPALAAgent.observe does)
            if agent.recurrent:
                boot = agent.executor.execute("values_recurrent", final, last["after"])
            else:
                boot = agent.executor.execute("values", final)
            reward[cut] += agent.gamma * np.asarray(boot, np.float32)[cut]
        done = terminated | truncated
        slot.versions.append(last["version"])
        rollout = slot.builder.add(last["states"], last["actions"], reward, (~done).astype(np.float32),
                                   last["logits"], final, last["starts"], last["before"])
        if rollout is not None:
            rollout["actor"], rollout["incarnation"] = index, slot.incarnation
            rollout["policy_versions"], slot.versions = np.array(slot.versions, np.int64), []
            self._rollouts.append(rollout)
        slot.returns += raw
        slot.lengths += 1
        for i in np.flatnonzero(done):
            self._finished.append(Episode(index, float(slot.returns[i]), int(slot.lengths[i]), bool(terminated[i]),
                                          bool(truncated[i]), self.total_steps, self.total_frames))
            slot.returns[i], slot.lengths[i] = 0.0, 0
            for s in slot.state:
                s[i] = 0.0
        slot.starts = done

    def _load_newest(self) -> int:
        """The newest published version, loaded into the inference copy if it holds another."""
        version, weights = self._published  # one read: a version complete before it was published
        if weights is not None and weights is not self._loaded:
            self.inference_agent.executor.set_weights(weights, strict=False)  # the policy's keys; slots stay
            self._loaded = weights
        return version

    def _admit(self, batch: dict[str, np.ndarray]) -> tuple[list[tuple[int, _ActorSlot, int]], list[int]]:
        """Each request's actor slot, with the step before completed: ``(rows, kept)``, the requests to answer
        as ``(actor, slot, seq)`` and their rows in ``batch`` (a killed incarnation's requests are dropped)."""
        rows, kept = [], []
        for r in range(len(batch["seq"])):
            index, incarnation, seq = int(batch["actor"][r]), int(batch["incarnation"][r]), int(batch["seq"][r])
            slot = self._slots.get(index)
            if slot is not None and incarnation < slot.incarnation:
                continue  # a request the killed incarnation sent: nobody waits for its answer
            if slot is None or slot.incarnation != incarnation or bool(batch["first"][r]):
                slot = self._slots[index] = _ActorSlot(self.inference_agent, incarnation)  # a new actor: all afresh
            elif slot.last is not None:
                self._complete(slot, index, batch["reward"][r], batch["terminated"][r], batch["truncated"][r],
                               batch["final"][r])
            if seq != slot.next_seq:
                raise RuntimeError(f"central inference: request {seq} of actor {index} where {slot.next_seq} "
                                   f"was due: a step was dropped or sent twice")
            slot.next_seq = seq + 1
            rows.append((index, slot, seq))
            kept.append(r)
        return rows, kept

    def _answer(self, batch: dict[str, np.ndarray]) -> None:
        with self._policy_lock:  # without overlap only: one executor call at a time on the learner's policy
            self._act(batch)

    def _act(self, batch: dict[str, np.ndarray]) -> None:
        agent = self.inference_agent
        version = self._load_newest()  # this batch acts with one version, whatever the learner does meanwhile
        rows, kept = self._admit(batch)
        if not rows:
            return
        obs = batch["obs"][kept].reshape((-1, *agent.state_space.shape))
        if agent.recurrent:
            before = tuple(np.concatenate([slot.state[i] for _, slot, _ in rows]) for i in range(2))
            actions, logits, _, after = agent.executor.execute("act_recurrent", obs, before)
            after = tuple(np.asarray(a) for a in after)
        else:
            actions, logits, _ = agent.executor.execute("act", obs)
            before = after = None
        actions, logits = np.asarray(actions), np.asarray(logits)
        n = agent.config.env.num_envs
        self.batch_sizes[len(rows)] += 1
        for k, (index, slot, seq) in enumerate(rows):
            part = slice(k * n, (k + 1) * n)
            state_before = None if before is None else tuple(b[part].copy() for b in before)
            if after is not None:
                for i in range(2):
                    slot.state[i][:] = after[i][part]
            slot.last = {"states": obs[part], "actions": actions[part], "logits": logits[part],
                         "before": state_before, "after": None if after is None else tuple(a[part] for a in after),
                         "starts": slot.starts.copy(), "version": version}
            self.answered[index] += 1
            self.executor.queues[f"actions-{index}"].put({"seq": seq, "incarnation": slot.incarnation,
                                                          "actions": actions[part]})

    # ---- the learning loop's sources (see ActorLearnerWorker.run) ------------------------------------------
    def _next_batch(self) -> list[dict[str, Any]] | None:
        """The next ``rollout.batch_size`` rollouts the inference thread finished (None after a second)."""
        k, deadline = self.agent.config.rollout.batch_size, time.monotonic() + 1.0
        while len(self._rollouts) < k:
            if time.monotonic() >= deadline or self._error is not None:
                return None
            time.sleep(0.001)
        batch = [self._rollouts.popleft() for _ in range(k)]
        with self._room:
            self._room.notify()
        return batch

    def _update(self, batch: list[dict[str, Any]]) -> dict[str, Any]:
        """One update, while the inference thread goes on acting with the last published version; then the
        learner's new weights are published as the next (``total_updates + 1``: `run` counts the update after)."""
        lags = [self.total_updates - int(rollout["policy_versions"].min()) for rollout in batch]
        for lag in lags:  # policy lag: updates between the version of the rollout's oldest step and this
            self.policy_lag[lag] += 1
        with self._policy_lock:
            metrics = self.agent.update(batch)
            self._publish(self.total_updates + 1)
        return {**metrics, "policy_lag": float(np.mean(lags))}

    def _drain_episodes(self) -> list[Episode]:
        new = [self._finished.popleft() for _ in range(len(self._finished))]  # those appended meanwhile stay
        self.episodes.extend(new)
        return new
