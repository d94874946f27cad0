"""``spacegraph train`` for Ape-X: ``--executor ray|local --workers N --shards M --address ADDR``, and
``--resume`` of an Ape-X run (its checkpoint holds ``apex.json``)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Callable

# Nothing of Ape-X is imported at the top: `spacegraph train` asks `wants_apex` on every run, and the Ape-X
# modules (the driver, the actor executors) cost about 25 ms of a DQN or IMPALA run's start-up.


def is_apex_run(directory: str) -> bool:
    """Whether a run directory holds an Ape-X checkpoint."""
    from reference_agents.training.apex import APEX_STATE

    return any(os.path.exists(os.path.join(directory, d, APEX_STATE)) for d in ("checkpoint", "checkpoint.old"))


def wants_apex(args: argparse.Namespace, config_path: str | None) -> bool:
    """Ape-X when ``--executor`` is given, when the config says ``agent: apex``, or when resuming an Ape-X run."""
    if getattr(args, "executor", None) is not None:
        return True
    if args.resume is not None:
        return is_apex_run(args.resume)
    if config_path is None:
        return False
    from reference_agents.agents.config import _read

    try:
        data = _read(config_path)
    except ValueError:
        return False
    return isinstance(data, dict) and data.get("agent") == "apex"


def _summary_lines(driver: Any) -> str:
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


def cmd_train_apex(args: argparse.Namespace, options: dict[str, Any], fail: Callable[[str], int],
                   summary: Callable[[Any, str], str], resolve_config: Callable[[str], str],
                   default_steps: int) -> int:
    """Runs (or resumes) an Ape-X training; returns the exit status."""
    from reference_agents.agents import ConfigError
    from reference_agents.training import read_trainer_state, set_framework_threads
    from reference_agents.agents.apex import ApexDriver, load_apex_config
    from reference_agents.training.apex import ApexTrainer, make_actor_executor, saved_executor_kind

    # a resumed run keeps the executor it was trained on unless --executor says otherwise
    kind = args.executor or (saved_executor_kind(args.resume) if args.resume is not None else None) or "local"
    executor = None
    trainer = None
    try:
        if args.resume is not None:
            if args.seed is not None:
                return fail("--seed cannot change a resumed run (its seed is in the checkpoint)")
            if args.shards is not None:
                return fail("--shards cannot change a resumed Ape-X run (each shard comes back from its snapshot)")
            # the threads of the backend the run will rebuild on: --backend, else the one saved
            set_framework_threads(args.backend or read_trainer_state(args.resume).get("backend") or "torch",
                                  args.threads)
            executor = make_actor_executor(kind, args.address)
            trainer = ApexTrainer.resume(args.resume, executor, backend=args.backend, workers=args.workers, **options)
            source = f"the checkpoint in {args.resume}"
            steps = args.steps or trainer.total_steps_target
        else:
            path = resolve_config(args.config)
            config, _ = load_apex_config(path, {"backend": args.backend, "seed": args.seed},
                                         {"workers": args.workers, "shards": args.shards})
            set_framework_threads(config.backend, args.threads)
            executor = make_actor_executor(kind, args.address)
            driver = ApexDriver(config, executor)
            stem = os.path.splitext(os.path.basename(path))[0]
            out = args.out or os.path.join("runs", f"{stem}-apex-{kind}-{driver.backend}-"
                                                   f"{time.strftime('%Y%m%d-%H%M%S')}")
            print(f"spacegraph train: Ape-X from {path} on the {kind} executor: {driver.num_workers} workers, "
                  f"{driver.num_shards} shards", file=sys.stderr)
            trainer = ApexTrainer(driver, out, **options)
            source = path
            steps = args.steps or default_steps
    except (ConfigError, ValueError, RuntimeError) as exc:
        if trainer is not None:
            trainer.close()
        if executor is not None:
            executor.shutdown()
        return fail(str(exc))
    try:
        if trainer.worker.total_steps >= steps:
            print(f"spacegraph train: {trainer.out_dir} is already at {trainer.worker.total_steps:,} env steps "
                  f"(--steps {steps:,}); nothing to train", file=sys.stderr)
            steps = trainer.worker.total_steps
        try:
            trainer.train(steps)
        except KeyboardInterrupt:
            result = trainer.result
            if result is not None and result.checkpoint:
                print(f"\ninterrupted at env step {result.total_steps:,}; checkpoint in {result.checkpoint}. "
                      f"Continue with: spacegraph train --resume {result.out_dir} --executor {kind}", file=sys.stderr)
            return 130
        print(summary(trainer, source))
        print(_summary_lines(trainer.driver))
        return 0
    finally:
        trainer.close()
        executor.shutdown()
