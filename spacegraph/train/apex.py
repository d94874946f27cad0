"""``spacegraph train`` for Ape-X: ``--executor ray|local --workers N --shards M --address ADDR``, and
``--resume`` of an Ape-X run (its checkpoint holds ``apex.json``)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from spacegraph.train.common import (DEFAULT_TRAIN_STEPS, default_run_dir, fail, nothing_to_train, print_interrupted,
                                     replica_failure, replica_failure_exit, replicas_error, train_summary)

# Nothing of Ape-X is imported at the top: the Ape-X modules (the driver, the actor executors) cost about 25 ms of
# a DQN or IMPALA run's start-up.


def apex_summary(driver: Any) -> str:
    """The lines after an Ape-X run's summary: executor, the transition ledger and failures."""
    ledger = driver.ledger()
    rows = [("executor", f"{type(driver.executor).__name__}: {driver.num_workers} workers x "
                         f"{driver.config.env.num_envs} envs, {driver.num_shards} shards"),
            ("transitions", f"{ledger['produced']:,} produced = {ledger['held']:,} held + {ledger['evicted']:,} "
                            f"evicted + {ledger['lost']:,} lost; {ledger['sampled']:,} sampled, "
                            f"{ledger['learned']:,} learned"),
            ("failures", ", ".join(f"{f['name']} at step {f['at_step']:,}" for f in
                                   driver.worker_failures + driver.shard_failures) or "none")]
    width = 12
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def cmd_train_apex(args: argparse.Namespace, options: dict[str, Any]) -> int:
    """Runs (or resumes) an Ape-X training; returns the exit status."""
    from reference_agents.agents import ConfigError, resolve_config_path
    from reference_agents.training import read_trainer_state, set_framework_threads
    from reference_agents.agents.apex import ApexDriver, load_apex_config
    from reference_agents.training.apex import ApexTrainer, make_actor_executor, saved_executor_kind
    from reference_agents.training.replicas import with_replicas

    # a resumed run keeps the executor it was trained on unless --executor says otherwise
    kind = args.executor or (saved_executor_kind(args.resume) if args.resume is not None else None) or "local"
    executor = None
    trainer = None
    try:
        if args.resume is not None:
            if args.shards is not None:
                return fail("--shards cannot change a resumed Ape-X run (each shard comes back from its snapshot)")
            # the threads of the backend the run will rebuild on: --backend, else the one saved
            set_framework_threads(args.backend or read_trainer_state(args.resume).get("backend") or "torch",
                                  args.threads)
            executor = make_actor_executor(kind, args.address)
            trainer = ApexTrainer.resume(args.resume, executor, backend=args.backend, workers=args.workers,
                                         replicas=args.replicas, replica_mode=args.replica_mode, **options)
            source = f"the checkpoint in {args.resume}"
            steps = args.steps or trainer.total_steps_target
        else:
            path = resolve_config_path(args.config)
            config, _ = load_apex_config(path, {"backend": args.backend, "seed": args.seed},
                                         {"workers": args.workers, "shards": args.shards})
            if args.replicas is not None:  # the learner's update on replicas (the workers only act)
                try:
                    config, _ = load_apex_config(with_replicas(config.model_dump(by_alias=True), args.replicas,
                                                               args.replica_mode))
                except ConfigError as exc:
                    raise replicas_error(path, exc) from None
            set_framework_threads(config.backend, args.threads)
            executor = make_actor_executor(kind, args.address)
            driver = ApexDriver(config, executor)
            out = args.out or default_run_dir(path, "apex", kind, driver.backend)
            print(f"spacegraph train: Ape-X from {path} on the {kind} executor: {driver.num_workers} workers, "
                  f"{driver.num_shards} shards", file=sys.stderr)
            try:
                trainer = ApexTrainer(driver, out, **options)
            except BaseException:
                driver.close()  # (the learner's replica processes)
                raise
            source = path
            steps = args.steps or DEFAULT_TRAIN_STEPS
    except (ConfigError, ValueError, RuntimeError) as exc:
        if trainer is not None:
            trainer.close()
        if executor is not None:
            executor.shutdown()
        return fail(str(exc))
    try:
        try:
            trainer.train(nothing_to_train(trainer, steps))
        except KeyboardInterrupt:
            print_interrupted(trainer, f" --executor {kind}")
            return 130
        except RuntimeError as exc:
            failure = replica_failure(exc)
            if failure is None:
                raise
            return replica_failure_exit(trainer, failure, f" --executor {kind}")
        print(train_summary(trainer, source))
        print(apex_summary(trainer.driver))
        return 0
    finally:
        trainer.close()
        executor.shutdown()
