"""Fixtures of the distributed suite: a Ray instance on 127.0.0.1 per test (token authentication on, a token of
its own), always shut down, with a check that none of its processes is left (also when the test fails).

Every test here is marked ``distributed``, so the suite-wide listener watch (``suites/conftest.py``,
`suites.listeners`) runs around each one: a listener of the test process or a descendant (Ray's GCS server,
raylet, agents, workers; actor processes; TF servers) bound to another address than loopback, other than a
documented TensorFlow server, fails the test.
"""

from __future__ import annotations

import pytest

#: What the tests give a local Ray instance on a 2-core machine.
RAY_CPUS, RAY_OBJECT_STORE = 2, 160 * 1024 * 1024


@pytest.fixture
def ray_executor():
    """A `RayActorExecutor` on a fresh local Ray instance; shut down after the test, passing or failing."""
    pytest.importorskip("ray")
    from harness.execution.ray import RayActorExecutor, wait_session_gone

    executor = RayActorExecutor(num_cpus=RAY_CPUS, object_store_memory=RAY_OBJECT_STORE)
    session = executor.session_dir
    try:
        yield executor
    finally:
        executor.shutdown()
        left = wait_session_gone(session)
        assert not left, f"Ray processes of {session} still running after shutdown: {left}"
