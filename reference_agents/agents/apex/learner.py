"""`ApexLearner`: the Ape-X learner on the driver: a prefetch thread keeps ``samples_in_flight`` shard `sample`
calls outstanding and fills a bounded queue with whichever batch comes first, an update thread learns from them,
writes the new priorities back to the shard each batch came from and publishes the weights every
``publish_every`` updates (one shared copy per publication)."""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from typing import Any, Callable, Sequence

import numpy as np

from harness.execution.actors import ActorFailure, ActorHandle, Future
from reference_agents.workers.results import UpdateMeans


class ApexLearner:
    """Learns from the shards' batches in its own threads; the driver starts, pauses and stops it.

    Args:
        agent: the learner's `DQNAgent` (``update(batch)`` with ``importance_weights``, ``get_weights``); its
            target network is synchronised every ``target_sync.every`` of *these* updates.
        shards: the shard actors (their list may change in place when the driver restarts one).
        batch_size: records per update.
        prefetch: batches the queue holds (the prefetch thread blocks when it is full).
        publish_every: updates between publications.
        put: shares a value with the actors (`ActorExecutor.put`).
        allowed_updates: ``fn() -> int``: the updates the schedule allows so far (throttling; None: no bound).
        on_shard_failure: ``fn(index, incarnation, failure)`` when a shard call fails (the driver restarts it).
        sample_timeout: seconds to wait for one sampled batch.
        priority_every: batches of one shard whose new priorities go back in one call (in the order learned,
            so a slot sampled twice keeps its last priority); the rest goes at `pause` and `stop`.
        samples_in_flight: `sample` calls kept outstanding (each to the live shard with the fewest outstanding,
            round robin among equals); the first to answer is queued and another is sent, so one slow shard
            (or a batch in transit) does not hold up the others.
        wait: ``fn(futures, num_returns, timeout) -> (ready, pending)`` (`ActorExecutor.wait`); None: polls
            ``Future.done``.

    Raises:
        ValueError: for a ``priority_every`` or ``samples_in_flight`` that is not a positive int.
    """

    def __init__(self, agent: Any, shards: Sequence[ActorHandle], batch_size: int, prefetch: int,
                 publish_every: int, put: Callable[[Any], Any], allowed_updates: Callable[[], int] | None = None,
                 on_shard_failure: Callable[[int, int, ActorFailure], None] | None = None,
                 sample_timeout: float = 60.0, priority_every: int = 1, samples_in_flight: int = 1,
                 wait: Callable[..., tuple[list[Future], list[Future]]] | None = None) -> None:
        for name, value in (("priority_every", priority_every), ("samples_in_flight", samples_in_flight)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"ApexLearner: {name} must be a positive int; got {value!r}")
        self.samples_in_flight = samples_in_flight
        self._wait = wait
        # the prefetch thread's calls: future -> (shard index, incarnation, sent at); answers it took but
        # could not queue yet (a pause settles every call in flight)
        self._in_flight: dict[Future, tuple[int, int, float]] = {}
        self._answered: deque[tuple[int, int, Any]] = deque()
        self.agent, self.shards = agent, shards
        self.batch_size, self.publish_every = int(batch_size), int(publish_every)
        self.priority_every = priority_every
        # per shard index: (incarnation, slot arrays, priority arrays) learned but not yet sent
        self._pending_priorities: dict[int, tuple[int, list[np.ndarray], list[np.ndarray]]] = {}
        self.put, self.allowed_updates, self.on_shard_failure = put, allowed_updates, on_shard_failure
        self.sample_timeout = sample_timeout
        self.queue: queue.Queue = queue.Queue(maxsize=int(prefetch))
        self.lock = threading.Lock()         # the agent: updates, weights, greedy evaluation
        self.active = threading.Event()      # set while the driver runs: learning pauses in between
        self.stopping = threading.Event()
        self._busy = (threading.Lock(), threading.Lock())   # held by the prefetch / update thread mid-iteration
        self.updates = 0
        self.records_learned = 0
        self.last_loss: float | None = None
        self.update_means = UpdateMeans()    # the learning diagnostics of the Trainer's next metric row
        self.version = 0                     # publications so far
        self.published: tuple[Any, int] | None = None
        self.priority_futures: list[Future] = []
        self.shard_live: list[bool] = [True] * len(shards)
        self._live_lock = threading.Lock()   # a late failure of an old incarnation must not mark the new one dead
        self.error: BaseException | None = None
        self._next_shard = 0
        self._threads: list[threading.Thread] = []

    # ---- lifecycle --------------------------------------------------------------------------------------
    def start(self) -> None:
        """Publishes the initial weights and starts the prefetch and update threads."""
        self.publish()
        for target, name in ((self._prefetch_loop, "apex-prefetch"), (self._update_loop, "apex-update")):
            thread = threading.Thread(target=self._guard(target), name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def _guard(self, fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:  # noqa: BLE001 - handed to the driver, which raises it
                self.error = exc
                self.stopping.set()
        return run

    def stop(self, timeout: float = 30.0) -> None:
        """Stops both threads (the batch in hand is learned or dropped), waits for them and sends the
        priorities still held."""
        self.stopping.set()
        self.active.set()
        while True:  # unblock a prefetch thread waiting on a full queue
            try:
                self.queue.get_nowait()
            except queue.Empty:
                break
        for thread in self._threads:
            thread.join(timeout)
        self._threads.clear()
        self._flush_priorities()

    def pause(self) -> None:
        """Stops learning after the iterations in progress and returns when both threads are idle and the
        priorities learned so far are sent (counts, shards and weights then agree until the next
        `active.set`)."""
        self.active.clear()
        with self._busy[0]:   # the prefetch thread is idle: settle its calls in flight (their batches are kept)
            while self._in_flight and not self.stopping.is_set():
                self._take_answers(0.1)
        with self._busy[1]:   # the update thread is idle: its held priorities are the caller's to send
            self._flush_priorities()

    def shard_failed(self, i: int, incarnation: int, failure: ActorFailure) -> None:
        """A call to incarnation ``incarnation`` of shard ``i`` failed: stop sampling it (unless the driver has
        restarted it since: a late failure of an old incarnation says nothing of the new one) and report it."""
        with self._live_lock:
            if self.shards[i].incarnation == incarnation:
                self.shard_live[i] = False
        if self.on_shard_failure is not None:
            self.on_shard_failure(i, incarnation, failure)

    def mark_live(self, i: int) -> None:
        """Shard ``i`` is back (restarted, its incarnation moved on): sample from it again."""
        with self._live_lock:
            self.shard_live[i] = True

    def check(self) -> None:
        """Raises the error that stopped a learner thread, if one did."""
        if self.error is not None:
            raise RuntimeError(f"ApexLearner: a learner thread failed: {type(self.error).__name__}: "
                               f"{self.error}") from self.error

    # ---- weights -------------------------------------------------------------------------------------------
    def publish(self) -> tuple[Any, int]:
        """Shares the Q-network's weights once (one `put`); the driver sends the shared copy to every worker."""
        with self.lock:
            weights = self.agent.get_weights()
        self.version += 1
        self.published = (self.put(weights), self.version)
        return self.published

    # ---- threads -------------------------------------------------------------------------------------------
    def _pick_shard(self) -> int | None:
        """The live shard with the fewest calls in flight (round robin among equals), or None."""
        n = len(self.shards)
        loads = [0] * n
        for j, _, _ in self._in_flight.values():
            if j < n:
                loads[j] += 1
        best = None
        for k in range(n):
            i = (self._next_shard + k) % n
            if self.shard_live[i] and (best is None or loads[i] < loads[best]):
                best = i
        if best is not None:
            self._next_shard = best + 1
        return best

    def _send_samples(self) -> None:
        """Sends `sample` calls until ``samples_in_flight`` are outstanding (or no shard is live)."""
        while len(self._in_flight) < self.samples_in_flight:
            i = self._pick_shard()
            if i is None:
                return
            handle = self.shards[i]
            incarnation = handle.incarnation
            try:
                future = handle.call("sample", self.batch_size)
            except ActorFailure as failure:
                self.shard_failed(i, incarnation, failure)
                continue
            self._in_flight[future] = (i, incarnation, time.monotonic())

    def _take_answers(self, timeout: float) -> int:
        """Waits up to ``timeout`` for one call in flight to answer and keeps every answered batch (failures
        are reported, empty answers and calls past ``sample_timeout`` dropped); returns the batches kept."""
        futures = list(self._in_flight)
        if self._wait is not None:
            ready, _ = self._wait(futures, 1, timeout)
        else:
            ready = [f for f in futures if f.done()]
        if not ready:
            time.sleep(0.001)   # (an executor whose wait does not block)
        kept = 0
        now = time.monotonic()
        for future in futures:
            i, incarnation, sent = self._in_flight[future]
            if future not in ready:
                if now - sent > self.sample_timeout:
                    del self._in_flight[future]
                continue
            del self._in_flight[future]
            try:
                out = future.result(timeout=self.sample_timeout)
            except ActorFailure as failure:
                self.shard_failed(i, incarnation, failure)
                continue
            except TimeoutError:
                continue
            if out is not None:          # None: the shard holds fewer than a batch so far
                self._answered.append((i, incarnation, out))
                kept += 1
        return kept

    def _prefetch_loop(self) -> None:
        while not self.stopping.is_set():
            self.active.wait()
            if self.stopping.is_set():
                return
            with self._busy[0]:
                if not self.active.is_set():   # paused meanwhile (`pause` settles the calls in flight)
                    continue
                self._send_samples()
                if not self._in_flight and not self._answered:
                    idle = 0.05      # no live shard
                elif self._answered or self._take_answers(0.1):
                    idle = 0.0
                else:
                    idle = 0.01 if not self._in_flight else 0.0   # every shard answered "not a batch yet"
            if idle:
                time.sleep(idle)
            while self._answered and not self.stopping.is_set() and self.active.is_set():
                try:
                    self.queue.put(self._answered[0], timeout=0.1)
                    self._answered.popleft()
                except queue.Full:
                    continue

    def _update_loop(self) -> None:
        while not self.stopping.is_set():
            self.active.wait()
            if self.allowed_updates is not None and self.updates >= self.allowed_updates():
                time.sleep(0.002)
                continue
            with self._busy[1]:
                if not self.active.is_set():
                    continue
                try:
                    i, incarnation, (records, slots, weights) = self.queue.get(timeout=0.1)
                except queue.Empty:
                    continue
                if self.stopping.is_set():
                    return
                self._learn(i, incarnation, records, slots, weights)

    def _learn(self, i: int, incarnation: int, records: dict[str, Any], slots: np.ndarray, weights: np.ndarray) -> None:
        batch = dict(records, importance_weights=weights)
        with self.lock:
            out = self.agent.update(batch)
        self.updates += 1
        self.records_learned += len(slots)
        self.last_loss = float(out["loss"])
        self.update_means.add(out)
        held = self._pending_priorities.get(i)
        if held is None or held[0] != incarnation:   # a restarted shard's slots mean nothing
            held = self._pending_priorities[i] = (incarnation, [], [])
        held[1].append(np.asarray(slots))
        held[2].append(np.abs(np.asarray(out["td_errors"], np.float32)))
        if len(held[1]) >= self.priority_every:
            self._flush_priorities(i)
        if self.updates % self.publish_every == 0:
            self.publish()

    def _flush_priorities(self, only: int | None = None) -> None:
        """Sends the held priorities of shard ``only`` (default: every shard) in one call each, to the
        incarnation their batches came from (dropped where the shard has died or been restarted since)."""
        for i in ([only] if only is not None else list(self._pending_priorities)):
            held = self._pending_priorities.pop(i, None)
            if held is None:
                continue
            incarnation, slots, priorities = held
            if i >= len(self.shards):
                continue
            handle = self.shards[i]
            if handle.incarnation != incarnation or not self.shard_live[i]:
                continue
            try:
                self.priority_futures.append(handle.call("update_priorities", np.concatenate(slots),
                                                         np.concatenate(priorities)))
            except ActorFailure:
                pass  # the shard's failure is seen and handled where it samples or adds
        if len(self.priority_futures) > 64:
            self._drain_priority_futures()

    def _drain_priority_futures(self) -> None:
        futures, self.priority_futures = self.priority_futures, []
        for f in futures:
            try:
                f.result(timeout=self.sample_timeout)
            except (ActorFailure, TimeoutError):
                pass  # the shard's failure is seen and handled where it samples or adds
