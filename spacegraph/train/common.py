"""What every ``spacegraph train`` path shares: the default step count, the error exit, the `Trainer` options
from the flags, the config and ``--out`` checks, the agent of a new run (``--replicas`` applied), the summary
table and the Ctrl-C message."""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from typing import Any

#: Env steps of a run when neither --steps nor a resumed checkpoint gives the total.
DEFAULT_TRAIN_STEPS = 100_000


def fail(message: str) -> int:
    """Prints ``spacegraph train: message`` on stderr; returns the exit status of a usage error, 2."""
    print(f"spacegraph train: {message}", file=sys.stderr)
    return 2


def trainer_options(args: argparse.Namespace) -> dict[str, Any]:
    """The `Trainer` keyword arguments the ``train`` flags give (None: the config's or the saved value)."""
    progress = False if args.quiet else (True if args.progress else None)
    return {"eval_every": args.eval_every, "eval_episodes": args.eval_episodes, "eval_envs": args.eval_envs,
            "target_return": args.target_return, "screen_episodes": args.screen_episodes,
            "checkpoint_every": args.checkpoint_every, "max_seconds": args.max_seconds, "progress": progress,
            "log_evals": not args.quiet, "tensorboard": not args.no_tensorboard}


def default_run_dir(config_path: str, *parts: str) -> str:
    """``runs/<config stem>-<parts>-<timestamp>``: where a new run goes without ``--out``."""
    stem = os.path.splitext(os.path.basename(config_path))[0]
    return os.path.join("runs", "-".join([stem, *parts, time.strftime("%Y%m%d-%H%M%S")]))


def print_interrupted(trainer: Any, resume_flags: str = "") -> None:
    """The Ctrl-C message: where the checkpoint is and the command that continues the run."""
    result = trainer.result
    if result is not None and result.checkpoint:
        print(f"\ninterrupted at env step {result.total_steps:,}; checkpoint in {result.checkpoint}. "
              f"Continue with: spacegraph train --resume {result.out_dir}{resume_flags}", file=sys.stderr)
    else:
        print("\ninterrupted in the middle of a step: no new checkpoint written"
              + (f" (the last one is in {trainer.last_checkpoint})" if trainer.last_checkpoint else ""),
              file=sys.stderr)


def replica_failure(exc: BaseException) -> BaseException | None:
    """The `ReplicaFailure` (a replica process of the update died) that ``exc`` is or was raised from (an Ape-X
    learner thread's error is raised again by the driver), else None."""
    from harness.execution.strategies import ReplicaFailure

    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, ReplicaFailure):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def replica_failure_exit(trainer: Any, failure: BaseException, resume_flags: str = "") -> int:
    """Says that a replica process died and the run stopped (the message names the replica, its pid, how it
    ended and the method), where the last checkpoint is and the command that resumes from it; returns 1, the
    exit status of a run that failed (2 is for usage errors)."""
    out = trainer.out_dir
    if trainer.last_checkpoint:
        then = (f"the last checkpoint, {trainer.last_checkpoint}, is kept; continue from it (with the run's "
                f"replicas again) with: spacegraph train --resume {out}{resume_flags}")
    else:
        then = ("no checkpoint was written before it (give --checkpoint-every N to save along the way); "
                "start the run again")
    print(f"spacegraph train: the run stopped: {failure}\n  {then}", file=sys.stderr)
    return 1


def nothing_to_train(trainer: Any, steps: int) -> int:
    """Says so when the run is at ``steps`` already; returns the total to train to (never below what it did)."""
    done = trainer.worker.total_steps
    if done >= steps:
        print(f"spacegraph train: {trainer.out_dir} is already at {done:,} env steps (--steps {steps:,}); nothing "
              f"to train. --steps is the run's total: give more than {done:,} to go on", file=sys.stderr)
        return done
    return steps


def check_env_config(config, source: str) -> None:
    """Makes the config's environment once, so that a bad ``env`` is a located config error.

    Raises:
        ConfigError: naming ``source`` and ``env.id``, ``env.atari``, ``env.kwargs`` or ``env.vectorizer`` (a
            native vectorizer is made once too, with one environment).
    """
    from reference_agents.agents import ConfigError
    from reference_agents.environments import make_env

    try:
        env = make_env(config.env.id, atari=config.env.atari, **config.env.kwargs)
    except ValueError as exc:
        message = str(exc).removeprefix("make_env: ")
        key = ("env.id" if "environment id" in message or "env_id" in message
               else "env.atari" if "atari" in message else "env.kwargs")
        raise ConfigError(source, [(key, message)]) from None
    env.close()
    vectorizer = getattr(config.env, "vectorizer", "python")
    if vectorizer != "python":
        from reference_agents.workers.native_envs import env_kwargs_of, make_vector_env

        try:
            make_vector_env(config.env.id, 1, env_kwargs_of(config.env.model_dump())).close()
        except ValueError as exc:
            raise ConfigError(source, [("env.vectorizer", str(exc))]) from None


def replicas_error(path: str, exc: Any) -> Any:
    """A `ConfigError` of a config rewritten by ``--replicas`` (a dict), naming the file and, on each
    ``execution`` key, the flag that set it."""
    from reference_agents.agents import ConfigError

    return ConfigError(path, [(key, f"{message} (set by --replicas)" if key.startswith("execution") else message)
                              for key, message in exc.problems])


def build_run_agent(path: str, config: Any, args: argparse.Namespace) -> Any:
    """The agent a new run trains: from the file ``path`` (``config``: it checked, with --backend/--seed), its
    ``execution.strategy`` rewritten by ``--replicas N [--replica-mode M]`` when given (`with_replicas`).

    Raises:
        ConfigError: naming ``path`` and the key (and ``--replicas`` on an ``execution`` key).
        ValueError: naming ``--replicas`` / ``--replica-mode`` for a bad value.
    """
    from reference_agents.agents import ConfigError, build_agent
    from reference_agents.training.replicas import with_replicas

    if args.replicas is None:
        return build_agent(path, backend=args.backend, seed=args.seed)
    data = with_replicas(config.model_dump(by_alias=True), args.replicas, args.replica_mode)
    try:
        return build_agent(data)
    except ConfigError as exc:
        raise replicas_error(path, exc) from None


def train_summary(trainer, source: str) -> str:
    from reference_agents.training.replicas import describe_strategy

    result, agent, w = trainer.result, trainer.agent, trainer.worker
    cfg = agent.config
    files = [f for f in ("metrics.csv", "metrics.jsonl", "episodes.csv", "learning_curve.png", "tensorboard",
                         "checkpoint")
             if result.out_dir and os.path.exists(os.path.join(result.out_dir, f))]
    last = result.history[-1] if result.history else None
    if trainer.target_return is None:
        solved = "no target (evaluation.target_return, --target-return)"
    elif result.solved_at_step is not None:
        solved = f"step {result.solved_at_step:,}"
    else:
        solved = "not reached"
    train_ret = w.mean_return(100)
    rows = [
        ("run", result.out_dir or "-"),
        ("config", f"{source} ({agent.backend}, seed {agent.seed})"),
        ("env", f"{cfg.env.id} x{w.num_envs}"),
        ("env steps", f"{result.total_steps:,} of {trainer.total_steps_target:,} (frames {result.total_frames:,})"),
        ("episodes", f"{result.episodes:,}"),
        ("updates", f"{w.total_updates:,}" + (f", last loss {w.last_loss:.4g}" if w.last_loss is not None else "")),
        ("time", f"{result.seconds:.1f} s this call; {result.total_seconds:.1f} s in all, "
                 f"{result.train_seconds:.1f} s of it stepping and updating"),
        ("steps/s", f"{result.steps_per_s:,.0f} (stepping and updating, all calls)"
                    if not math.isnan(result.steps_per_s) else "-"),
        ("train return", f"{train_ret:.2f} (mean of the last {min(len(w.episodes), 100)} episodes)"
                         if not math.isnan(train_ret) else "- (no episode finished)"),
        ("eval return", f"{last['eval_return']:.2f} ({last['eval_episodes']} greedy episodes at step "
                        f"{last['env_steps']:,})" if last else "- (no evaluation)"),
        ("solved means", trainer.evaluation.describe() + f", evaluated every {trainer.eval_every:,} env steps"),
        ("solved at", solved),
        ("stopped", {"steps": "the step total was reached", "target_return": "solved",
                     "max_seconds": "--max-seconds ran out", "callback": "a callback asked",
                     "interrupted": "Ctrl-C"}[result.stop_reason]),
        ("update on", describe_strategy(result.strategy)),
        ("files", " ".join(files) or "-"),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def out_dir_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the folder ``spacegraph train`` will write into (``--resume DIR``, ``--out`` or the
    default ``runs/``), checked before any work: a file in the way, not creatable, not writable. None if fine."""
    from harness.execution.serialization import check_out_dir

    try:
        if args.resume is not None:
            check_out_dir(args.resume, "--resume")
        elif args.out is not None:
            check_out_dir(args.out, "--out")
        else:
            check_out_dir("runs", "the default --out folder")
    except ValueError as exc:
        return str(exc)
    return None
