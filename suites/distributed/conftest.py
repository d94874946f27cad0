"""Fixtures of the distributed suite: a Ray instance on 127.0.0.1 per test, always shut down, with a check that
none of its processes is left (also when the test fails)."""

from __future__ import annotations

import os
import time

import pytest

#: What the tests give a local Ray instance on a 2-core machine.
RAY_CPUS, RAY_OBJECT_STORE = 2, 160 * 1024 * 1024


def wait_gone(session_dir: str, timeout: float = 20.0) -> list[int]:
    """Polls until no process of the Ray session is left; returns those still there after ``timeout``."""
    from harness.execution.ray import ray_session_processes

    end = time.monotonic() + timeout
    left = ray_session_processes(session_dir)
    while left and time.monotonic() < end:
        time.sleep(0.25)
        left = ray_session_processes(session_dir)
    return left


@pytest.fixture
def ray_executor():
    """A `RayActorExecutor` on a fresh local Ray instance; shut down after the test, passing or failing."""
    pytest.importorskip("ray")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    from harness.execution.ray import RayActorExecutor

    executor = RayActorExecutor(num_cpus=RAY_CPUS, object_store_memory=RAY_OBJECT_STORE)
    session = executor.session_dir
    try:
        yield executor
    finally:
        executor.shutdown()
        left = wait_gone(session)
        assert not left, f"Ray processes of {session} still running after shutdown: {left}"
