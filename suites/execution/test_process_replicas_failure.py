"""`ProcessReplicas` failures and lifetime: a killed replica stops the next update with `ReplicaFailure` naming it
and leaves no process behind; replica 0's variables are unchanged by the failed step; ``close`` is idempotent;
replicas exit when replica 0 dies; a replica that cannot build is reported with its traceback (issue 43)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from harness.execution.strategies import ProcessReplicas, ReplicaFailure
from spacegraph.reports import multi_device_graphs as mdg

pytestmark = pytest.mark.distributed


def gone(pid: int, within_s: float = 10.0) -> bool:
    """Whether process ``pid`` has ended (reaped or a zombie nobody waits for) within ``within_s``."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def test_a_killed_replica_stops_the_next_update_and_nothing_is_left():
    multi = mdg.build("dqn", "torch", None, strategy=ProcessReplicas(3, ["update_from_batch"]))
    args = mdg.batch("dqn", 8)
    multi.execute("update_from_batch", *args)
    pids = multi.strategy.pids
    assert len(pids) == 2 and all(not gone(p, 0.0) for p in pids)
    before = multi.get_weights()
    os.kill(pids[0], signal.SIGKILL)  # replica 1
    with pytest.raises(ReplicaFailure) as err:
        multi.execute("update_from_batch", *args)
    text = str(err.value)
    assert "replica 1 of 3" in text and f"pid {pids[0]}" in text and "SIGKILL" in text
    assert "'update_from_batch'" in text and "unchanged" in text
    after = multi.get_weights()
    assert all(np.array_equal(before[k], after[k]) for k in before)  # the failed step changed nothing
    assert all(gone(p) for p in pids)  # replica 2 was ended too
    assert multiprocessing.active_children() == []
    with pytest.raises(ReplicaFailure, match="replica 1 of 3"):  # and the executor keeps saying so
        multi.execute("update_from_batch", *args)
    multi.close()
    multi.close()  # idempotent
    np.asarray(multi.execute("act", args[0]["states"], 0))  # methods that need no replica keep working


def test_close_ends_the_replicas_and_bad_input_keeps_them():
    multi = mdg.build("dqn", "torch", None, strategy=ProcessReplicas(2, ["update_from_batch"]))
    records, weights = mdg.batch("dqn", 4)
    with pytest.raises(Exception, match="importance_weights"):  # checked on replica 0 before anything is sent
        multi.execute("update_from_batch", records, weights[:, None])
    with pytest.raises(ValueError, match="a batch of 1 rows cannot be split across 2 replicas"):
        multi.execute("update_from_batch", {k: v[:1] for k, v in records.items()}, weights[:1])
    multi.execute("update_from_batch", records, weights)  # the replicas are still in step
    pids = multi.strategy.pids
    multi.close()
    assert all(gone(p) for p in pids)
    assert multiprocessing.active_children() == []
    with pytest.raises(RuntimeError, match=r"'update_from_batch' needs the replica processes, which "
                                           r"executor\.close\(\) ended") as err:
        multi.execute("update_from_batch", records, weights)
    assert not isinstance(err.value, ReplicaFailure)  # nothing failed: the executor was closed


PARENT = textwrap.dedent("""
    import os, sys
    from harness.execution.strategies import ProcessReplicas
    from spacegraph.reports import multi_device_graphs as mdg

    if __name__ == "__main__":
        multi = mdg.build("dqn", "torch", None, strategy=ProcessReplicas(2, ["update_from_batch"]))
        multi.execute("update_from_batch", *mdg.batch("dqn", 4))
        print(" ".join(map(str, multi.strategy.pids)), flush=True)
        os.kill(os.getpid(), 9)  # replica 0 dies without a chance to clean up
""")


def test_replicas_exit_when_replica_0_dies(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                         cwd=os.getcwd(), env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.returncode == -signal.SIGKILL, out.stderr
    pids = [int(p) for p in out.stdout.split()]
    assert len(pids) == 1
    assert gone(pids[0], within_s=15), f"replica {pids[0]} outlived replica 0"


def test_a_replica_that_cannot_build_is_reported_with_its_traceback():
    """A root whose replicas fail to build (an input space their build rejects): the first update names the replica
    and carries its traceback; nothing is left running."""
    strategy = ProcessReplicas(2, ["update_from_batch"], devices=["cpu", "cuda:7"])
    multi = mdg.build("dqn", "torch", None, strategy=strategy)
    with pytest.raises(ReplicaFailure) as err:
        multi.execute("update_from_batch", *mdg.batch("dqn", 4))
    assert "replica 1 of 2" in str(err.value) and "cuda:7" in str(err.value)
    multi.close()
    assert multiprocessing.active_children() == []


def test_a_root_that_cannot_be_handed_to_the_replicas_is_refused_by_name():
    """The spawn pickles the root for the replicas: a root holding something unpicklable (a lock) stops the build
    with one error naming the root and the reason, and no replica process is left."""
    import threading

    graph, spaces = mdg.dqn_graph(hidden=(16,))
    graph.unpicklable = threading.Lock()
    with pytest.raises(ValueError, match=r"the root DQNGraph 'dqn' cannot be handed to replica processes \(pickling "
                                         r"it failed: TypeError: cannot pickle '_thread.lock' object\)"):
        mdg.GraphExecutor(graph, spaces, backend="torch", api_methods=mdg.dqn_methods(False),
                          strategy=ProcessReplicas(3, ["update_from_batch"]))
    assert multiprocessing.active_children() == []
