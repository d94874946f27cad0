"""``spacegraph train`` for an agent trained in one process by a `Trainer` over a `VectorEnvWorker`: DQN, and a
user's agent named by dotted path in its config (``agent: my_project.agents:MyAgent``); ``--resume`` of either."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from spacegraph.logs import import_tensorflow_quietly
from spacegraph.train.common import (DEFAULT_TRAIN_STEPS, build_run_agent, check_env_config, default_run_dir, fail,
                                     nothing_to_train, print_interrupted, replica_failure, replica_failure_exit,
                                     train_summary)


def cmd_train_single(args: argparse.Namespace, options: dict[str, Any]) -> int:
    """Runs (or resumes) a one-process training; returns the exit status."""
    from reference_agents.agents import ConfigError, describe_config_path, load_config, resolve_config_path
    from reference_agents.agents.base import close_agent
    from reference_agents.training import Trainer, read_trainer_state, set_framework_threads
    from reference_agents.training.replicas import with_replicas

    trainer = None
    if args.workers is not None or args.shards is not None or args.address is not None:
        return fail("--workers, --shards and --address are for distributed training: give --executor ray (or local)")
    try:
        try:
            if args.resume is not None:
                if args.out is not None and os.path.abspath(args.out) != os.path.abspath(args.resume):
                    return fail(f"--out {args.out} differs from --resume {args.resume}: a resumed run continues in "
                                f"its own directory")
                backend = args.backend or read_trainer_state(args.resume).get("backend") or "tf"
                set_framework_threads(backend, args.threads)
                if backend == "tf":
                    import_tensorflow_quietly(args.verbose_logs)
                trainer = Trainer.resume(args.resume, backend=args.backend, replicas=args.replicas,
                                         replica_mode=args.replica_mode, **options)
                source = f"the checkpoint in {args.resume}"
                if args.config is not None:
                    path = resolve_config_path(args.config)
                    given, _ = load_config(path, {"backend": trainer.agent.backend, "seed": trainer.agent.seed})
                    if args.replicas is not None:  # (checked, so that its strategy has the saved one's form)
                        given, _ = load_config(with_replicas(given.model_dump(by_alias=True), args.replicas,
                                                             args.replica_mode))
                    saved = trainer.agent.config.model_dump(by_alias=True)
                    differ = sorted(k for k, v in given.model_dump(by_alias=True).items() if saved.get(k) != v)
                    if differ:
                        return fail(f"{path} differs from the config saved in {args.resume} in {differ}; resume "
                                    f"without CONFIG to continue with the saved one")
                    source = path
                steps = args.steps or trainer.total_steps_target
            else:
                path = resolve_config_path(args.config)
                print(f"spacegraph train: config {describe_config_path(args.config, path)}", file=sys.stderr)
                config, _ = load_config(path, {"backend": args.backend, "seed": args.seed})
                check_env_config(config, path)
                set_framework_threads(config.backend, args.threads)
                if config.backend == "tf":
                    import_tensorflow_quietly(args.verbose_logs)
                agent = build_run_agent(path, config, args)
                try:
                    trainer = Trainer(agent, args.out or default_run_dir(path, agent.backend), **options)
                except BaseException:
                    close_agent(agent)
                    raise
                source = path
                steps = args.steps or DEFAULT_TRAIN_STEPS
        except (ConfigError, ValueError) as exc:
            return fail(str(exc))
        return run_training(trainer, source, steps)
    finally:
        if trainer is not None:
            trainer.close()  # the environments and the replica processes, however the run ended


def run_training(trainer: Any, source: str, steps: int) -> int:
    """Trains to ``steps`` and prints the summary; returns the exit status (130 after Ctrl-C, 1 when a replica
    process died: `replica_failure_exit`)."""
    try:
        trainer.train(nothing_to_train(trainer, steps))
    except KeyboardInterrupt:
        print_interrupted(trainer)
        if trainer.result is not None:
            print(train_summary(trainer, source))
        return 130
    except RuntimeError as exc:
        failure = replica_failure(exc)
        if failure is None:
            raise
        return replica_failure_exit(trainer, failure)
    print(train_summary(trainer, source))
    return 0
