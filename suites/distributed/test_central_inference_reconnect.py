"""Central inference with actors started apart from the learner (``spacegraph train --executor seed --serve``
and ``spacegraph actor``): a learner killed mid-run and resumed from its checkpoint on the same address takes
its actors back (with the token it keeps in the run directory); actors leave when the learner ends the run; the
learner refuses a wrong or duplicate index."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from harness.execution.grpc_stream import GrpcActorLearnerExecutor, RemoteBody, run_remote_actor

pytestmark = pytest.mark.distributed

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "3", "SPACEGRAPH_VALIDATE": "0"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _learner(args: list[str], log: Path) -> subprocess.Popen:
    """``spacegraph train ARGS`` in its own process group; stdout to ``log``.out, stderr to ``log``."""
    return subprocess.Popen([sys.executable, "-m", "spacegraph.cli", "train", *args], env=ENV, text=True,
                            stdout=log.with_suffix(".out").open("w"), stderr=log.open("w"), start_new_session=True)


def _stop(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def test_a_learner_resumed_on_its_address_takes_its_actors_back(tmp_path):
    address = f"127.0.0.1:{_free_port()}"
    run = tmp_path / "run"
    never_solved = ["--target-return", "100000", "--screen-episodes", "1", "--eval-episodes", "1", "--quiet"]
    first = _learner(["impala_cartpole", "--executor", "seed", "--actors", "2", "--serve", address,
                      "--steps", "100000000", "--eval-every", "20000", "--checkpoint-every", "20000",
                      "--out", str(run), *never_solved], tmp_path / "learner-1.log")
    token = run / "actor-token"                          # the run's own token, made by the learner (0600)
    deadline = time.monotonic() + 120
    while not token.exists() and time.monotonic() < deadline and first.poll() is None:
        time.sleep(0.2)
    assert token.exists(), f"no token file: {(tmp_path / 'learner-1.log').read_text()[-3000:]}"
    assert token.stat().st_mode & 0o777 == 0o600
    actor_logs = [tmp_path / f"actor-{i}.log" for i in range(2)]
    actors = [subprocess.Popen([sys.executable, "-m", "spacegraph.cli", "actor", "--address", address, "--index",
                                str(i), "--reconnect-seconds", "120", "--token-file", str(token)], env=ENV,
                               stdout=subprocess.DEVNULL, stderr=log.open("w"), start_new_session=True)
              for i, log in enumerate(actor_logs)]
    procs = [first, *actors]
    try:
        state = run / "checkpoint" / "trainer.json"
        deadline = time.monotonic() + 180
        while not state.exists() and time.monotonic() < deadline and first.poll() is None:
            time.sleep(0.5)
        assert state.exists(), f"no checkpoint within 180 s: {(tmp_path / 'learner-1.log').read_text()[-3000:]}"
        time.sleep(1.0)                                   # (the checkpoint is written whole, by a rename)
        os.killpg(first.pid, signal.SIGKILL)              # the learner dies mid-run, actors connected
        first.wait(10)
        steps_saved = json.loads((run / "checkpoint" / "worker.json").read_text())["total_steps"]
        target = steps_saved + 30_000
        second = _learner(["--resume", str(run), "--executor", "seed", "--actors", "2", "--serve", address,
                           "--steps", str(target), *never_solved], tmp_path / "learner-2.log")
        procs.append(second)
        second.wait(150)
        out, log2 = (tmp_path / "learner-2.out").read_text(), (tmp_path / "learner-2.log").read_text()
        assert second.returncode == 0, f"the resumed learner failed: {out[-2000:]}\n{log2[-3000:]}"
        per_actor = re.search(r"rollouts learned per actor \{0: (\d+), 1: (\d+)\}", out)
        assert per_actor and min(int(x) for x in per_actor.groups()) > 0, out[-2000:]
        codes = [a.wait(60) for a in actors]               # the run ended in order: both leave by themselves
        logs = [log.read_text() for log in actor_logs]
        assert codes == [0, 0], logs
        assert all(re.search(rf"reconnected to {re.escape(address)} as incarnation 1", text) for text in logs), logs
        assert json.loads((run / "checkpoint" / "worker.json").read_text())["total_steps"] >= target
    finally:
        _stop(procs)


def _record_queues():
    spec = {"x": ("int64", ())}
    return {"requests": (spec, 4), "actions-0": (spec, 2), "actions-1": (spec, 2)}


def _echo(transport, index, incarnation, rounds):
    """A tiny body: put ``rounds`` records tagged with the incarnation, then wait for the queue to close."""
    for k in range(rounds):
        transport.queues["requests"].put({"x": np.int64(1000 * incarnation + k)})
    transport.queues[f"actions-{index}"].take(1)


BODIES = {"echo": RemoteBody(_echo, lambda args: (int(args[0]),))}


def test_the_learner_refuses_a_wrong_or_a_duplicate_index_and_actors_leave_on_close():
    executor = GrpcActorLearnerExecutor(2, _record_queues(), {}, spawn=False, bodies=BODIES)
    executor.start_actors(_echo, 2)
    token = executor.token
    try:
        text = io.StringIO()
        assert run_remote_actor(executor.address, 5, token, BODIES, reconnect_s=10, stream=text) == 2
        assert "refused" in text.getvalue() and "in [0, 2); got 5" in text.getvalue()
        codes: list[int] = []
        thread = threading.Thread(target=lambda: codes.append(run_remote_actor(executor.address, 1, token, BODIES, 10)))
        thread.start()
        got = executor.queues["requests"].take(2, timeout=30)
        assert list(got["x"]) == [0, 1] and executor.connected() == {1: 0}
        text = io.StringIO()
        assert run_remote_actor(executor.address, 1, token, BODIES, reconnect_s=10, stream=text) == 2
        assert "actor 1 is already connected" in text.getvalue()
    finally:
        executor.shutdown()
    thread.join(30)
    assert codes == [0], "the actor did not leave when the learner closed its queues"
    assert executor.connected() == {}


def test_an_actor_with_no_learner_leaves_after_its_reconnect_time():
    text = io.StringIO()
    start = time.monotonic()
    assert run_remote_actor(f"127.0.0.1:{_free_port()}", 0, b"t" * 16, BODIES, reconnect_s=1.0, stream=text) == 1
    assert time.monotonic() - start < 30 and "no learner at" in text.getvalue()
