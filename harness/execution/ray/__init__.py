"""The Ray executor: `RayActorExecutor` runs `harness.execution.actors` actors as Ray actors.

This package is the only place in the project (outside the RLlib comparisons of ``spacegraph.reports``)
that imports ray; ``suites/test_import_contract.py`` checks it.
"""

from harness.execution.ray.executor import RayActorExecutor, ray_session_processes, wait_session_gone

__all__ = ["RayActorExecutor", "ray_session_processes", "wait_session_gone"]
