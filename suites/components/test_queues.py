"""Threads around the queues: blocking put/get with timeouts, close, and the prefetcher (what specs cannot express)."""

from __future__ import annotations

import queue
import threading
import time
from typing import Any, Callable

import numpy as np
import pytest

from harness.execution.executor import GraphExecutor
from harness.testing.plugin import selected_backends
from reference_agents.components.queues import BlockingQueue, FIFOQueue, Prefetcher, QueueClosedError
from reference_agents.components.queues import blocking as blocking_module
from suites.doubles import FakeClock

BACKENDS = selected_backends()
#: a mutant of one of these modules runs this file (``harness.testing.mutation_run``)
MUTATION_COVERS = ("reference_agents.components.queues.blocking", "reference_agents.components.queues.prefetcher",
                   "reference_agents.components.queues.fifo_queue")


def _blocking(backend: str, capacity: int) -> BlockingQueue:
    ex = GraphExecutor(FIFOQueue(capacity), {"records": "[B]{x: int64[], y: float32[2]}", "num_records": "int64[]"},
                       backend=backend)
    return BlockingQueue(ex)


def _batch(start: int, n: int) -> dict[str, np.ndarray]:
    x = np.arange(start, start + n, dtype=np.int64)
    return {"x": x, "y": np.stack([x, -x], 1).astype(np.float32)}


def _thread(target: Callable[[], None], errors: list[BaseException]) -> threading.Thread:
    def run() -> None:
        try:
            target()
        except BaseException as error:  # noqa: BLE001 - reported by the test
            errors.append(error)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("backend", BACKENDS)
def test_fifo_order_across_producer_and_consumer_threads(backend: str) -> None:
    q = _blocking(backend, 4)
    errors: list[BaseException] = []
    got: list[np.ndarray] = []

    def produce() -> None:
        for start in range(0, 30, 3):  # batches of 3 into a queue of 4: put must wait for room
            q.put(_batch(start, 3), timeout=2.0)

    def consume() -> None:
        for _ in range(15):
            records = q.get(2, timeout=2.0)
            assert np.array_equal(records["y"][:, 0], records["x"]) and np.array_equal(records["y"][:, 1],
                                                                                         -records["x"])
            got.append(records["x"])

    threads = [_thread(produce, errors), _thread(consume, errors)]
    for t in threads:
        t.join(5.0)
    assert not any(t.is_alive() for t in threads), "a thread is stuck"
    assert not errors, errors
    assert np.array_equal(np.concatenate(got), np.arange(30))
    assert q.qsize() == 0


def _fake_clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    """A clock for `BlockingQueue`'s deadlines that moves 0.05 s at every reading (no wall-time asserts)."""
    clock = FakeClock(tick=0.05)
    monkeypatch.setattr(blocking_module, "time", clock)
    return clock


@pytest.mark.parametrize("backend", BACKENDS)
def test_put_times_out_with_the_records_not_taken(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    q = _blocking(backend, 3)
    q.put(_batch(0, 2))
    clock = _fake_clock(monkeypatch)
    with pytest.raises(queue.Full, match="1 of 5 records enqueued") as info:
        q.put(_batch(2, 5), timeout=0.2)  # one slot is left: one record is taken, four are not
    assert 0.2 <= clock.now <= 0.2 + 2 * clock.tick, "gave up before the deadline on the clock, or long after it"
    assert info.value.accepted == 1
    remaining = info.value.remaining
    assert np.array_equal(remaining["x"], np.arange(3, 7)) and remaining["y"].shape == (4, 2)
    assert np.array_equal(q.get(3, timeout=0.5)["x"], np.arange(3)), "what was taken stays queued, in order"


@pytest.mark.parametrize("backend", BACKENDS)
def test_tuple_records_keep_their_structure_when_split(backend: str) -> None:
    """Records may be tuples (a Tuple record space): a put that only partly fits splits each part alike."""
    ex = GraphExecutor(FIFOQueue(3), {"records": "[B](int64[], float32[2])", "num_records": "int64[]"},
                       backend=backend)
    q = BlockingQueue(ex)
    x = np.arange(5, dtype=np.int64)
    with pytest.raises(queue.Full) as info:
        q.put((x, np.stack([x, -x], 1).astype(np.float32)), timeout=0.1)
    remaining = info.value.remaining
    assert isinstance(remaining, tuple) and np.array_equal(remaining[0], [3, 4]) and remaining[1].shape == (2, 2)
    got = q.get(3, timeout=0.5)
    assert np.array_equal(got[0], [0, 1, 2]) and np.array_equal(got[1][:, 1], [0, -1, -2])


@pytest.mark.parametrize("backend", BACKENDS)
def test_get_times_out_without_dequeuing(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    q = _blocking(backend, 4)
    q.put(_batch(0, 2))
    clock = _fake_clock(monkeypatch)
    with pytest.raises(queue.Empty, match="waiting for 3 records \\(2 held\\)"):
        q.get(3, timeout=0.2)
    assert 0.2 <= clock.now <= 0.2 + 2 * clock.tick, "gave up before the deadline on the clock, or long after it"
    assert q.qsize() == 2
    with pytest.raises(ValueError, match="num_records=5 exceeds the capacity 4"):
        q.get(5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_get_waits_for_a_later_put(backend: str) -> None:
    q = _blocking(backend, 4)
    errors: list[BaseException] = []
    t = _thread(lambda: (time.sleep(0.1), q.put(_batch(7, 3), timeout=1.0)), errors)
    assert np.array_equal(q.get(3, timeout=2.0)["x"], [7, 8, 9])
    t.join(2.0)
    assert not t.is_alive() and not errors, errors


@pytest.mark.parametrize("backend", BACKENDS)
def test_close_wakes_waiters_with_a_clear_error(backend: str) -> None:
    full, empty = _blocking(backend, 2), _blocking(backend, 2)
    full.put(_batch(0, 2))
    errors: list[BaseException] = []
    waiters = [_thread(lambda: empty.get(1, timeout=None), errors),
               _thread(lambda: full.put(_batch(5, 3), timeout=None), errors)]
    time.sleep(0.2)
    assert all(t.is_alive() for t in waiters) and not errors, "the waiters should be blocked"
    full.close()
    empty.close()
    for t in waiters:
        t.join(2.0)
    assert not any(t.is_alive() for t in waiters), "close did not wake a waiter"
    assert len(errors) == 2 and all(isinstance(e, QueueClosedError) for e in errors), errors
    assert all("closed" in str(e) for e in errors)
    with pytest.raises(QueueClosedError):
        full.put(_batch(0, 1), timeout=0.1)
    with pytest.raises(QueueClosedError):
        full.get(0)


def test_blocking_queue_checks_its_arguments() -> None:
    with pytest.raises(ValueError, match="capacity must be a positive int"):
        BlockingQueue(object(), capacity=0)
    with pytest.raises(ValueError, match="poll_interval must be positive"):
        BlockingQueue(object(), poll_interval=0)
    with pytest.raises(ValueError, match="capacity must be a positive int; got 0"):
        FIFOQueue(0)


def _counter(limit: int | None = None, fail_at: int | None = None) -> tuple[Callable[[], Any], list[int]]:
    calls: list[int] = []

    def fn() -> np.ndarray:
        k = len(calls)
        calls.append(k)
        if fail_at is not None and k == fail_at:
            raise KeyError("batch source broke")
        if limit is not None and k >= limit:
            raise StopIteration
        return np.full((2, 3), k, np.float32)
    return fn, calls


def test_prefetcher_keeps_order_and_respects_depth() -> None:
    fn, calls = _counter()
    with Prefetcher(fn, depth=2) as p:
        time.sleep(0.2)
        assert len(calls) <= 3, f"depth 2 staged {len(calls)} (at most 2 queued and 1 waiting to be queued)"
        got = [p.next(timeout=1.0)[0, 0] for _ in range(6)]
    assert got == list(range(6))
    assert not p.alive


def test_prefetcher_surfaces_errors_and_the_end_of_the_stream() -> None:
    fn, _ = _counter(fail_at=2)
    p = Prefetcher(fn, depth=1)
    assert p.next(timeout=1.0)[0, 0] == 0 and p.next(timeout=1.0)[0, 0] == 1
    with pytest.raises(KeyError, match="batch source broke"):
        p.next(timeout=1.0)
    p.close(timeout=2.0)
    fn, _ = _counter(limit=2)
    with Prefetcher(fn) as p:
        assert [b[0, 0] for b in p] == [0, 1]
        for _ in range(2):  # an ended stream stays ended: no wait for a batch that never comes
            with pytest.raises(StopIteration):
                p.next(timeout=0.5)


def test_prefetcher_close_joins_the_thread_and_times_out_next() -> None:
    gate = threading.Event()
    p = Prefetcher(lambda: gate.wait(0.3) or np.zeros(1), depth=1)
    with pytest.raises(queue.Empty):
        p.next(timeout=0.05)
    start = time.monotonic()
    p.close(timeout=2.0)
    assert not p.alive and time.monotonic() - start < 2.0
    with pytest.raises(RuntimeError, match="closed"):
        p.next(timeout=0.1)
    with pytest.raises(ValueError, match="depth must be a positive int"):
        Prefetcher(lambda: 0, depth=0)
    with pytest.raises(ValueError, match="backend must be one of"):
        Prefetcher(lambda: 0, backend="jax")


@pytest.mark.parametrize("backend", BACKENDS)
def test_prefetcher_stages_blocking_queue_batches_as_backend_tensors(backend: str) -> None:
    q = _blocking(backend, 8)
    q.put(_batch(0, 8))
    with Prefetcher(lambda: q.get(2, timeout=1.0), depth=2, backend=backend) as p:
        batches = [p.next(timeout=2.0) for _ in range(4)]
        q.close()  # wakes the prefetch thread's next get at once
    xs = np.concatenate([np.asarray(b["x"]) for b in batches])
    assert np.array_equal(xs, np.arange(8))
    module = {"tf": "tensorflow", "torch": "torch"}[backend]
    assert all(type(b["y"]).__module__.startswith(module) for b in batches), type(batches[0]["y"])


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_blocking_queue_of_capacity_one_hands_records_over_one_at_a_time(backend: str) -> None:
    q = _blocking(backend, 1)
    assert q.capacity == 1
    q.put(_batch(0, 1))
    with pytest.raises(queue.Full):
        q.put(_batch(1, 1), timeout=0.05)
    assert np.asarray(q.get(1, timeout=1.0)["x"]).tolist() == [0]


@pytest.mark.parametrize("num_records", [-1, True, 1.0])
def test_get_refuses_a_count_that_is_no_non_negative_int(num_records: Any) -> None:
    q = BlockingQueue(object(), capacity=4)  # the count is checked before the executor is touched
    with pytest.raises(ValueError, match="num_records must be a non-negative int"):
        q.get(num_records, timeout=0.05)


def test_prefetcher_resolves_a_backend_object_as_its_name() -> None:
    """A `Backend` (e.g. ``executor.backend``) stages batches as that backend's tensors, as its name does."""
    from harness.backends import get_backend

    backend = get_backend(BACKENDS[-1])
    with Prefetcher(lambda: np.ones(3, np.float32), backend=backend) as p:
        batch = p.next(timeout=2.0)
    module = {"tf": "tensorflow", "torch": "torch"}[BACKENDS[-1]]
    assert type(batch).__module__.startswith(module), type(batch)


def test_prefetcher_close_drops_the_staged_batches() -> None:
    """`close` drops what is staged (device memory of staged batches is freed with the prefetcher still held)."""
    import gc
    import weakref

    made: list[weakref.ref] = []

    class Batch:
        pass

    def fn() -> Batch:
        batch = Batch()
        made.append(weakref.ref(batch))
        return batch

    p = Prefetcher(fn, depth=3)
    deadline = time.monotonic() + 2.0
    while p._staged.qsize() < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert p._staged.qsize() == 3
    staged = made[:3]  # (a fourth may be in the thread's hands, waiting for room, until it ends)
    p.close(timeout=2.0)
    gc.collect()
    assert not p.alive and all(ref() is None for ref in staged)
