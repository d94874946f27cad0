"""Workers: vectorised environments and the worker that runs an agent on them."""

from reference_agents.workers.envs import VectorEnv, frames_per_step, make_env
from reference_agents.workers.protocol import Worker
from reference_agents.workers.vector_worker import Episode, SampleBatch, VectorEnvWorker, WorkerStats

__all__ = ["VectorEnv", "frames_per_step", "make_env", "Episode", "SampleBatch", "VectorEnvWorker", "Worker", "WorkerStats"]
