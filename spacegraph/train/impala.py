"""``spacegraph train`` for IMPALA: one process (``--executor local``, the default), distributed TensorFlow
(``--executor tf-dist --actors N [--cluster-spec FILE]``), Ray (``--executor ray --workers N [--address
ADDR]``) or central inference (``--executor seed --actors N``: actor processes on a gRPC stream to the
learner, actors started elsewhere with ``--serve HOST:PORT`` and ``spacegraph actor``, or Ray actors with
``--address``), and ``--resume`` of any of them (the checkpoint holds the learner; actors start afresh,
and actors started elsewhere reconnect to a learner resumed on the same ``--serve`` address)."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

from spacegraph.serve import ServeOptions, actor_command, ensure_token, serve_options
from spacegraph.train.common import (DEFAULT_TRAIN_STEPS, build_run_agent, default_run_dir, fail, nothing_to_train,
                                     print_interrupted, replica_failure, replica_failure_exit, train_summary)

EXECUTORS = ("local", "tf-dist", "ray", "seed")


def worker_factory(kind: str, actors: int, address: str | None, cluster_spec: str | None,
                   publish_every: int, serve: ServeOptions | None = None) -> Callable[[Any], Any] | None:
    """``fn(agent) -> worker`` for ``kind`` (None: the one-process `VectorEnvWorker`); ``serve``: central
    inference serving actors started elsewhere (its token is read when the worker is made)."""
    if kind == "local":
        return None
    from reference_agents.agents.impala.actor_learner import ActorLearnerWorker, actor_learner_queues

    if kind == "seed":  # central inference: actors step environments, the learner acts (gRPC stream, or Ray)
        from reference_agents.agents.impala.central_inference import CentralInferenceWorker

        def make_queues(queues: Any) -> Any:
            if address is not None:
                from harness.execution.ray.actor_learner import RayActorLearnerExecutor

                return RayActorLearnerExecutor(actors, queues, {}, address=address)
            from harness.execution.grpc_stream import GrpcActorLearnerExecutor

            if serve is not None:
                from reference_agents.agents.impala.central_inference import REMOTE_BODIES

                return GrpcActorLearnerExecutor(actors, queues, {}, host=serve.host, port=serve.port, spawn=False,
                                                token=serve.token, bodies=REMOTE_BODIES, credentials=serve.credentials)
            return GrpcActorLearnerExecutor(actors, queues, {})

        return lambda agent: CentralInferenceWorker(agent, make_queues, actors)

    if kind == "tf-dist":
        from harness.execution.tf_dist import TFActorLearnerExecutor

        def make_executor(rollouts: Any, episodes: Any, weights: Any) -> Any:
            return TFActorLearnerExecutor(actors, actor_learner_queues(rollouts, episodes, actors), weights,
                                          cluster_spec=cluster_spec)
    else:
        from harness.execution.ray.actor_learner import RayActorLearnerExecutor

        def make_executor(rollouts: Any, episodes: Any, weights: Any) -> Any:
            return RayActorLearnerExecutor(actors, actor_learner_queues(rollouts, episodes, actors), weights,
                                           address=address)

    return lambda agent: ActorLearnerWorker(agent, make_executor, publish_every=publish_every)


def cmd_train_impala(args: argparse.Namespace, options: dict[str, Any]) -> int:
    """Runs (or resumes) an IMPALA training; returns the exit status."""
    from reference_agents.agents import ConfigError, describe_config_path, load_config, resolve_config_path
    from reference_agents.agents.base import close_agent
    from reference_agents.training import Trainer, set_framework_threads

    kind = args.executor or "local"
    if args.shards is not None:
        return fail("--shards is for Ape-X; IMPALA has no replay")
    if kind in ("tf-dist", "seed") and args.workers is not None:
        return fail(f"--executor {kind} takes --actors N (actor processes), not --workers")
    if kind == "ray" and args.actors is not None:
        return fail("--executor ray takes --workers N (Ray actors), not --actors")
    if kind == "local" and (args.actors or args.workers or args.address or args.cluster_spec):
        return fail("--actors, --workers, --address and --cluster-spec need --executor tf-dist or ray")
    if args.address is not None and kind not in ("ray", "seed"):
        return fail("--address joins a Ray cluster: give --executor ray (or seed)")
    if args.cluster_spec is not None and kind != "tf-dist":
        return fail("--cluster-spec is for --executor tf-dist")
    if args.serve is not None and (kind != "seed" or args.address is not None):
        return fail("--serve is for --executor seed over gRPC (without --address)")
    try:
        serve = serve_options(args)
    except ValueError as exc:
        return fail(str(exc))
    actors = (args.actors if kind in ("tf-dist", "seed") else args.workers) or 2
    factory = worker_factory(kind, actors, args.address, args.cluster_spec, args.publish_every or 1, serve)
    if kind != "local":  # TensorBoard: the queue sizes and actor counts at every evaluation
        from reference_agents.training.scalars import actor_learner_scalars, central_inference_scalars

        options = dict(options, worker_scalars=central_inference_scalars if kind == "seed" else actor_learner_scalars)
    trainer = None
    try:
        if args.resume is not None:
            set_framework_threads(args.backend or "torch", args.threads)
            if serve is not None:
                ensure_token(serve, args.resume)
            trainer = Trainer.resume(args.resume, backend=args.backend, worker_factory=factory,
                                     replicas=args.replicas, replica_mode=args.replica_mode, **options)
            source = f"the checkpoint in {args.resume}"
            steps = args.steps or trainer.total_steps_target
        else:
            path = resolve_config_path(args.config)
            print(f"spacegraph train: config {describe_config_path(args.config, path)}", file=sys.stderr)
            config, _ = load_config(path, {"backend": args.backend, "seed": args.seed})
            set_framework_threads(config.backend, args.threads)
            agent = build_run_agent(path, config, args)
            try:
                out = args.out or default_run_dir(path, agent.backend)
                if serve is not None:
                    ensure_token(serve, out)
                worker = factory(agent) if factory is not None else None
                try:
                    trainer = Trainer(agent, out, worker=worker, **options)
                except BaseException:
                    if worker is not None:
                        worker.close()
                    raise
            except BaseException:
                close_agent(agent)  # (its replica processes)
                raise
            source = path
            steps = args.steps or DEFAULT_TRAIN_STEPS
        if kind != "local":
            ex = trainer.worker.executor
            where = (", ".join(ex.cluster["actor"]) if ex.cluster else getattr(ex, "address", None) and
                     f"gRPC at {ex.address}" or args.address or "a local Ray instance")
            what = "central inference: actors step environments, the learner acts for all" if kind == "seed" else \
                "one learner"
            print(f"spacegraph train: IMPALA on the {kind} executor: {trainer.worker.executor.num_actors} actors "
                  f"({where}), {what}", file=sys.stderr)
            if serve is not None:
                print(actor_command(serve, ex.address, actors), file=sys.stderr, flush=True)
    except (ConfigError, ValueError, RuntimeError) as exc:
        if trainer is not None:
            trainer.close()
        return fail(str(exc))
    try:
        steps = nothing_to_train(trainer, steps)
        if trainer.worker.total_steps < steps:
            trainer.train(steps)
    except KeyboardInterrupt:
        print_interrupted(trainer, f" --executor {kind}" if kind != "local" else "")
        if trainer.result is not None:
            print(train_summary(trainer, source))
        return 130
    except RuntimeError as exc:
        failure = replica_failure(exc)
        if failure is None:
            raise
        return replica_failure_exit(trainer, failure, f" --executor {kind}" if kind != "local" else "")
    finally:
        trainer.close()  # the actors, the environments and the learner's replica processes
    print(train_summary(trainer, source))
    if kind != "local":
        print("\n".join(distributed_summary(trainer.worker, kind)))
    return 0


def distributed_summary(worker: Any, kind: str) -> list[str]:
    """The lines after a distributed run's summary: batched inference (``seed``), actors, rollouts learned
    per actor and failures, and steps whose outcome the transport lost (with the rollouts lost in them)."""
    lines = []
    if kind == "seed":
        lines.append(f"{'inference':<12}  {sum(worker.batch_sizes.values()):,} batched calls, "
                     f"{worker.mean_batch() or 0.0:.2f} actors per call on average; policy lag "
                     f"{worker.policy_lag_mean() or 0.0:.2f} updates on average")
    lines.append(f"{'actors':<12}  {worker.executor.num_actors}; rollouts learned per actor "
                 f"{dict(sorted(worker.received.items()))}; failures: "
                 + ("; ".join(f.message for f in worker.executor.failures) or "none"))
    if worker.transport_faults:
        lines.append(f"{'transport':<12}  {len(worker.transport_faults)} step(s) whose outcome the transport lost "
                     f"({', '.join(f['step'] for f in worker.transport_faults)}); rollouts lost in them: "
                     f"{worker.lost_rollouts}")
    return lines
