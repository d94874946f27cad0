"""Distributed TensorFlow as an actor-learner transport: a learner task and actor processes with TF servers.

The only package that starts ``tf.distribute.Server``s (agents and components never do).
"""

from harness.execution.tf_dist.cluster import (
    ActorFailureReport, TFActorLearnerExecutor, Transport, free_port, local_cluster, read_cluster_spec)
from harness.execution.tf_dist.transport import TFRecordQueue, TFSession, TFWeightStore

__all__ = ["ActorFailureReport", "TFActorLearnerExecutor", "TFRecordQueue", "TFSession", "TFWeightStore", "Transport",
           "free_port", "local_cluster", "read_cluster_spec"]
