"""``spacegraph train`` for an agent trained in one process by a `Trainer` over a `VectorEnvWorker`: DQN, and a
user's agent named by dotted path in its config (``agent: my_project.agents:MyAgent``); ``--resume`` of either."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from spacegraph.logs import import_tensorflow_quietly
from spacegraph.train.common import (DEFAULT_TRAIN_STEPS, check_env_config, default_run_dir, fail, nothing_to_train,
                                     print_interrupted, train_summary)


def cmd_train_single(args: argparse.Namespace, options: dict[str, Any]) -> int:
    """Runs (or resumes) a one-process training; returns the exit status."""
    from reference_agents.agents import (ConfigError, build_agent, describe_config_path, load_config,
                                         resolve_config_path)
    from reference_agents.training import Trainer, read_trainer_state, set_framework_threads

    if args.workers is not None or args.shards is not None or args.address is not None:
        return fail("--workers, --shards and --address are for distributed training: give --executor ray (or local)")
    try:
        if args.resume is not None:
            if args.out is not None and os.path.abspath(args.out) != os.path.abspath(args.resume):
                return fail(f"--out {args.out} differs from --resume {args.resume}: a resumed run continues in its "
                            f"own directory")
            backend = args.backend or read_trainer_state(args.resume).get("backend") or "tf"
            set_framework_threads(backend, args.threads)
            if backend == "tf":
                import_tensorflow_quietly(args.verbose_logs)
            trainer = Trainer.resume(args.resume, backend=args.backend, **options)
            source = f"the checkpoint in {args.resume}"
            if args.config is not None:
                path = resolve_config_path(args.config)
                given, _ = load_config(path, {"backend": trainer.agent.backend, "seed": trainer.agent.seed})
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
            agent = build_agent(path, backend=args.backend, seed=args.seed)
            trainer = Trainer(agent, args.out or default_run_dir(path, agent.backend), **options)
            source = path
            steps = args.steps or DEFAULT_TRAIN_STEPS
    except (ConfigError, ValueError) as exc:
        return fail(str(exc))
    try:
        trainer.train(nothing_to_train(trainer, steps))
    except KeyboardInterrupt:
        print_interrupted(trainer)
        if trainer.result is not None:
            print(train_summary(trainer, source))
        return 130
    print(train_summary(trainer, source))
    return 0
