"""The Ray executor: `RayActorExecutor` runs `harness.execution.actors` actors as Ray actors.

`init_local_ray` / `shutdown_local_ray` start and stop a local Ray instance bound to 127.0.0.1 with token
authentication (a token of its own); everything in the project that starts Ray locally goes through them.

This package is the only place in the project (outside the RLlib comparisons of ``spacegraph.reports``)
that imports ray; ``suites/test_import_contract.py`` checks it.
"""

from harness.execution.ray.executor import JOIN_TOKEN_HELP, RayActorExecutor
from harness.execution.ray.local import (
    init_local_ray, join_ray, local_token_path, ray_session_processes, shutdown_local_ray, wait_session_gone)

__all__ = ["JOIN_TOKEN_HELP", "RayActorExecutor", "init_local_ray", "join_ray", "local_token_path", "ray_session_processes",
           "shutdown_local_ray", "wait_session_gone"]
