"""How `ProcessReplicas` hands shards to its replicas (issue 43): a large shard goes through a shared-memory
segment per replica (one copy that does not wait for the replica) and arrives exactly as the socket would
deliver it; a segment that is too small is replaced and the old one unlinked; a header that does not fit its
segment is refused; a processes run on shards through shared memory equals one device and leaves no segment
behind."""

from __future__ import annotations

import json
import multiprocessing
import threading
from multiprocessing import Pipe, shared_memory

import numpy as np
import pytest

from harness.execution.strategies import ProcessReplicas, process_comm
from harness.execution.strategies.process_comm import SHARED_MIN_BYTES, ShardSegment, recv_arrays, send_arrays
from spacegraph.reports import multi_device_graphs as mdg


def sent(conn, header, arrays, segment, into, attached):
    """`send_arrays` from a thread (a socket holds less than a large shard) while this one receives."""
    thread = threading.Thread(target=send_arrays, args=(conn, header, arrays, segment))
    thread.start()
    try:
        return recv_arrays(into, attached)
    finally:
        thread.join(timeout=10)


def exists(name: str) -> bool:
    try:
        shared_memory.SharedMemory(name=name).close()
    except FileNotFoundError:
        return False
    return True


def test_a_large_shard_goes_through_shared_memory_and_a_small_one_over_the_socket():
    mine, theirs = Pipe(duplex=True)
    segment, attached = ShardSegment(), {}
    rng = np.random.default_rng(0)
    big = rng.integers(0, 255, size=(16, 3, 84, 84), dtype=np.uint8)
    cut = rng.normal(size=(6, 40, 3)).astype(np.float32)[:, 5:30]  # a view along axis 1: not contiguous
    scalar = np.float32(0.25)
    try:
        header, arrays = sent(mine, {"op": "call", "n": 1}, [big, cut, scalar], segment, theirs, attached)
        assert header == {"op": "call", "n": 1}
        assert list(attached) == [segment.shm.name]  # it came through the segment
        for want, got in zip([big, cut, scalar], arrays):
            assert got.dtype == np.asarray(want).dtype and np.array_equal(got, want)
        assert arrays[1].flags.writeable and arrays[1].flags.c_contiguous
        arrays[0][:] = 0  # the replica's copy is its own: the next shard is not written under it
        assert np.array_equal(np.ndarray(big.shape, big.dtype, segment.shm.buf), big)

        small = np.arange(10, dtype=np.int64)
        assert small.nbytes < SHARED_MIN_BYTES
        first = segment.shm.name
        header, arrays = sent(mine, {"op": "call"}, [small], segment, theirs, attached)
        assert np.array_equal(arrays[0], small) and list(attached) == [first] and segment.shm.name == first

        bigger = np.ones((2, big.nbytes), np.uint8)  # does not fit: a new segment, the old one unlinked
        header, arrays = sent(mine, {"op": "call"}, [bigger], segment, theirs, attached)
        assert np.array_equal(arrays[0], bigger)
        assert segment.shm.name != first and list(attached) == [segment.shm.name]
        assert not exists(first)
    finally:
        for shm in attached.values():
            shm.close()
        name = segment.shm.name
        segment.close()
        mine.close()
        theirs.close()
    assert not exists(name)


def test_a_shared_header_that_does_not_fit_its_segment_is_refused():
    mine, theirs = Pipe(duplex=True)
    segment = ShardSegment()
    try:
        send_arrays(mine, {"op": "call"}, [np.zeros(SHARED_MIN_BYTES, np.uint8)], segment)
        header = json.loads(theirs.recv_bytes().decode())
        cases = [
            ({**header, "arrays": [["|u1", [2 * SHARED_MIN_BYTES]]]}, "does not fit the shared segment"),
            ({**header, "shared": {**header["shared"], "offsets": [-64]}}, "does not fit the shared segment"),
            ({**header, "shared": {**header["shared"], "offsets": [0, 64]}}, "1 arrays with 2 offsets"),
            ({**header, "arrays": [["|O", [1]]]}, "refused an array of dtype '|O'"),
        ]
        for bad, why in cases:
            mine.send_bytes(json.dumps(bad).encode())
            with pytest.raises(ValueError, match=why):
                recv_arrays(theirs, {})
        mine.send_bytes(json.dumps(header).encode())
        with pytest.raises(ValueError, match="through shared memory where none was expected"):
            recv_arrays(theirs)
    finally:
        segment.close()
        mine.close()
        theirs.close()


@pytest.mark.distributed
@pytest.mark.parametrize("backend", ["torch", "tf"])
@pytest.mark.parametrize("loss,size", [("dqn", 7), ("impala", 5)])
def test_processes_on_shards_through_shared_memory_equal_one_device(backend, loss, size, monkeypatch):
    """Every shard through shared memory (the IMPALA batch is cut along axis 1): outputs and weights equal one
    device's, and ``close`` unlinks the segment."""
    monkeypatch.setattr(process_comm, "SHARED_MIN_BYTES", 0)
    method, reduction = mdg.UPDATES[loss]
    single = mdg.build(loss, backend, None)
    multi = mdg.build(loss, backend, None, strategy=ProcessReplicas(2, [method], reduction=reduction))
    try:
        for step in range(2):
            args = mdg.batch(loss, size + step, seed=step)  # the second batch needs a larger segment
            for a, b in zip(single.execute(method, *args), multi.execute(method, *args)):
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
        mine, theirs = mdg.main_weights(single), mdg.main_weights(multi)
        assert max(float(np.max(np.abs(mine[k] - theirs[k]))) for k in mine) < 1e-5
        name = multi.strategy.segments[0].shm.name
        assert exists(name)
    finally:
        multi.close()
    assert not exists(name)
    assert multiprocessing.active_children() == []
