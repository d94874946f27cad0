"""The `spacegraph` command: demo, train, build (with --profile), spaces and spec."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Sequence

from spacegraph.arguments import finite_float, positive_float, positive_int
from spacegraph.serve import add_actor_parser

#: TF_CPP_MIN_LOG_LEVEL as the user set it (restored under --verbose); TensorFlow's C++ logs are off otherwise.
_USER_TF_LOG_LEVEL = os.environ.get("TF_CPP_MIN_LOG_LEVEL")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# NumPy's BLAS pool, before NumPy loads: env-side Atari frames resize by small matrix products, which
# ran 6x slower with the default pool on a busy 2-core machine (371 vs 2,351 steps/s).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


#: Lines TensorFlow's C++ side writes to stderr while it loads, before its log level applies: absl's
#: "before absl::InitializeLog()" notice and absl-formatted lines (I/W/E + date, pid, file:line]).
_TF_NOISE = re.compile(r"^(WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
                       r"|[IWEF]\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ \S+:\d+\] .*"
                       r"|To enable the following instructions: .*rebuild TensorFlow.*)$")


def set_log_level(verbose: bool) -> None:
    """TensorFlow's (and absl's) logs off, or, with ``verbose``, as the environment asks (TF's default)."""
    if verbose:
        if _USER_TF_LOG_LEVEL is None:
            os.environ.pop("TF_CPP_MIN_LOG_LEVEL", None)
        else:
            os.environ["TF_CPP_MIN_LOG_LEVEL"] = _USER_TF_LOG_LEVEL
    else:
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"


def import_tensorflow_quietly(verbose: bool = False) -> bool:
    """Imports TensorFlow now, dropping the start-up lines its C++ side writes to stderr.

    TensorFlow writes absl's notice, oneDNN's and CUDA's start-up lines straight to file
    descriptor 2 while it loads, whatever ``TF_CPP_MIN_LOG_LEVEL`` says. Unless ``verbose``,
    stderr is caught during the import and every other line is passed on. Later imports are
    free. Nothing happens when TensorFlow is imported already or not installed.

    Returns:
        Whether TensorFlow is importable.
    """
    import importlib.util

    if "tensorflow" in sys.modules:
        return True
    if importlib.util.find_spec("tensorflow") is None:
        return False
    from harness.backends.tf_import import import_tensorflow  # TensorFlow without its eager Keras import

    if verbose:
        import_tensorflow()
        return True
    import tempfile

    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            tf = import_tensorflow()
            tf.get_logger().setLevel("ERROR")
            try:
                from absl import logging as absl_logging

                absl_logging.set_verbosity(absl_logging.ERROR)
            except ImportError:
                pass
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        caught.seek(0)
        text = caught.read().decode(errors="replace")
    kept = [line for line in text.splitlines() if line.strip() and not _TF_NOISE.match(line)]
    if kept:
        print("\n".join(kept), file=sys.stderr)
    return True


def _kv(items: list[str] | None, what: str) -> dict[str, str]:
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"spacegraph: {what} must look like NAME=VALUE; got {item!r}")
        out[key.strip()] = value.strip()
    return out


def cmd_build(args: argparse.Namespace) -> int:
    from harness.measure.build_profile import format_profile, load_target, profile_build, to_json

    try:
        config = json.loads(args.config) if args.config else {}
    except json.JSONDecodeError as exc:
        raise SystemExit(f"spacegraph build: --config is not valid JSON: {exc}") from None
    try:
        factory, spaces = load_target(args.target, config, _kv(args.space, "--space"))
    except ValueError as exc:
        raise SystemExit(f"spacegraph build: {exc}") from None
    from harness.graph.errors import SpacegraphError

    if "tf" in args.backend:
        import_tensorflow_quietly(args.verbose_logs)
    for backend in args.backend:
        try:
            result = profile_build(factory, spaces, backend, repeats=args.repeats if args.profile else 1)
        except (SpacegraphError, ValueError, TypeError) as exc:
            raise SystemExit(f"spacegraph build {args.target} ({backend}): {type(exc).__name__}: {exc}") from None
        print(to_json(result) if args.json else format_profile(result))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from spacegraph.demo import run_demo

    if "tf" in args.backend:
        import_tensorflow_quietly(args.verbose_logs)
    return run_demo(backends=args.backend, train_steps=args.train_steps, train_seconds=args.train_seconds)


DEFAULT_TRAIN_STEPS = 100_000


#: Where a bare config name is looked for, in order (relative to the current folder), before the installed package.
CONFIG_SEARCH = (".", "configs", os.path.join("reference_agents", "configs"))


def resolve_config(text: str) -> str:
    """A config file path for ``text``: an existing file, or a bare name (``dqn_cartpole``).

    A bare name is ``NAME.yaml``/``.yml``/``.json`` in the current folder, in ``configs/`` (a
    project's), in ``reference_agents/configs/`` (a checkout of this repository), and last in
    the installed ``reference_agents`` package: a checkout's file wins over the installed copy.
    `describe_config` says which one was taken.

    Raises:
        ConfigError: naming ``text`` and, for a bare name, the folders searched and the configs there.
    """
    from reference_agents.agents import CONFIG_DIR, ConfigError

    if os.path.isfile(text):
        return text
    bare = os.sep not in text and "/" not in text and not text.endswith((".yaml", ".yml", ".json"))
    if bare:
        folders = [*CONFIG_SEARCH, CONFIG_DIR]
        for folder in folders:
            for ext in (".yaml", ".yml", ".json"):
                candidate = os.path.join(folder, text + ext)
                if os.path.isfile(candidate):
                    return candidate
        known = sorted(os.path.splitext(f)[0] for f in os.listdir(CONFIG_DIR)
                       if f.endswith((".yaml", ".yml", ".json")))
        raise ConfigError(text, [("", f"no such file, and no config of that name in {', '.join(folders)} "
                                      f"(there are: {', '.join(known) or 'none'})")])
    raise ConfigError(text, [("", "no such file")])


def describe_config(text: str, path: str) -> str:
    """Which file the config argument ``text`` resolved to (the installed copy is named as such)."""
    from reference_agents.agents import CONFIG_DIR

    where = os.path.abspath(path)
    if os.path.abspath(os.path.dirname(path)) == os.path.abspath(CONFIG_DIR) and not \
            os.path.abspath(CONFIG_DIR).startswith(os.path.abspath(os.curdir) + os.sep):
        return f"{where} (the installed reference_agents package's copy of {text!r})"
    return where


def check_env_config(config, source: str) -> None:
    """Makes the config's environment once, so that a bad ``env`` is a located config error.

    Raises:
        ConfigError: naming ``source`` and ``env.id``, ``env.atari`` or ``env.kwargs``.
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


def _train_summary(trainer, source: str) -> str:
    import math

    result, agent, w = trainer.result, trainer.agent, trainer.worker
    cfg = agent.config
    files = [f for f in ("metrics.csv", "metrics.jsonl", "episodes.csv", "learning_curve.png", "checkpoint")
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


def cmd_train(args: argparse.Namespace) -> int:
    import time

    from reference_agents.agents import ConfigError, DQNAgent, load_agent_config
    from reference_agents.training import Trainer, read_trainer_state, set_framework_threads

    def fail(message: str) -> int:
        print(f"spacegraph train: {message}", file=sys.stderr)
        return 2

    if args.config is None and args.resume is None:
        return fail("give a CONFIG (a file or a name in reference_agents/configs, e.g. dqn_cartpole) or --resume DIR")
    problem = out_dir_problem(args)
    if problem:
        return fail(problem)
    progress = False if args.quiet else (True if args.progress else None)
    options = {"eval_every": args.eval_every, "eval_episodes": args.eval_episodes, "eval_envs": args.eval_envs,
               "target_return": args.target_return, "screen_episodes": args.screen_episodes,
               "checkpoint_every": args.checkpoint_every,
               "max_seconds": args.max_seconds, "progress": progress, "log_evals": not args.quiet,
               "tensorboard": not args.no_tensorboard}
    from spacegraph.train_apex import cmd_train_apex, wants_apex

    try:
        config_path = resolve_config(args.config) if args.config is not None and args.resume is None else None
    except ConfigError as exc:
        return fail(str(exc))
    from spacegraph.train_impala import cmd_train_impala, wants_impala

    if wants_impala(args, config_path):
        return cmd_train_impala(args, options, fail, _train_summary, resolve_config, describe_config,
                                DEFAULT_TRAIN_STEPS)
    if (args.executor in ("tf-dist", "seed") or args.actors is not None or args.cluster_spec is not None
            or args.publish_every is not None or args.serve is not None or args.token_file or args.tls_cert
            or args.tls_key):
        return fail("--executor tf-dist/seed, --actors, --cluster-spec, --serve (--token-file, --tls-*) and "
                    "--publish-every are for IMPALA "
                    "configs (agent: impala; Ape-X publishes every apex.publish_every learner updates)")
    if wants_apex(args, config_path):
        return cmd_train_apex(args, options, fail, _train_summary, resolve_config, DEFAULT_TRAIN_STEPS)
    if args.workers is not None or args.shards is not None or args.address is not None:
        return fail("--workers, --shards and --address are for distributed training: give --executor ray (or local)")
    try:
        if args.resume is not None:
            if args.seed is not None:
                return fail("--seed cannot change a resumed run (its seed is in the checkpoint)")
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
                path = resolve_config(args.config)
                given, _ = load_agent_config(path, {"backend": trainer.agent.backend, "seed": trainer.agent.seed})
                saved = trainer.agent.config.model_dump(by_alias=True)
                differ = sorted(k for k, v in given.model_dump(by_alias=True).items() if saved.get(k) != v)
                if differ:
                    return fail(f"{path} differs from the config saved in {args.resume} in {differ}; resume "
                                f"without CONFIG to continue with the saved one")
                source = path
            steps = args.steps or trainer.total_steps_target
        else:
            path = resolve_config(args.config)
            print(f"spacegraph train: config {describe_config(args.config, path)}", file=sys.stderr)
            from harness.specs.project import add_import_roots

            add_import_roots([path])  # a project's own components, named in its config, import from its root
            config, _ = load_agent_config(path, {"backend": args.backend, "seed": args.seed})
            check_env_config(config, path)
            set_framework_threads(config.backend, args.threads)
            if config.backend == "tf":
                import_tensorflow_quietly(args.verbose_logs)
            agent = DQNAgent(path, backend=args.backend, seed=args.seed)  # (IMPALA and Ape-X: above)
            stem = os.path.splitext(os.path.basename(path))[0]
            out = args.out or os.path.join("runs", f"{stem}-{agent.backend}-{time.strftime('%Y%m%d-%H%M%S')}")
            trainer = Trainer(agent, out, **options)
            source = path
            steps = args.steps or DEFAULT_TRAIN_STEPS
    except (ConfigError, ValueError) as exc:
        return fail(str(exc))
    if trainer.worker.total_steps >= steps:
        print(f"spacegraph train: {trainer.out_dir} is already at {trainer.worker.total_steps:,} env steps "
              f"(--steps {steps:,}); nothing to train. --steps is the run's total: give more than "
              f"{trainer.worker.total_steps:,} to go on", file=sys.stderr)
        steps = trainer.worker.total_steps  # (the run's total is not lowered below what it has done)
    try:
        trainer.train(steps)
    except KeyboardInterrupt:
        result = trainer.result
        if result is not None and result.checkpoint:
            print(f"\ninterrupted at env step {result.total_steps:,}; checkpoint in {result.checkpoint}. "
                  f"Continue with: spacegraph train --resume {result.out_dir}", file=sys.stderr)
        else:
            print("\ninterrupted in the middle of a step: no new checkpoint written"
                  + (f" (the last one is in {trainer.last_checkpoint})" if trainer.last_checkpoint else ""),
                  file=sys.stderr)
        if result is not None:
            print(_train_summary(trainer, source))
        return 130
    print(_train_summary(trainer, source))
    return 0


def cmd_new_component(args: argparse.Namespace) -> int:
    from spacegraph.scaffold import new_component, snake_case

    try:
        written = new_component(args.name, args.dir, args.package)
    except (OSError, ValueError) as exc:
        print(f"spacegraph new component: {exc}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path}")
    snake = snake_case(args.name)
    print(f"next: write the oracle {snake}_apply (the spec's oracle check fails until then), then in {args.dir}: "
          f"spacegraph spec test specs")
    return 0


def cmd_spaces(args: argparse.Namespace) -> int:
    import numpy as np

    from harness.spaces import parse

    try:
        space = parse(args.text)
    except ValueError as exc:
        raise SystemExit(f"spacegraph spaces: {exc}") from None
    try:
        value = space.sample(args.size, rng=args.seed)
    except ValueError as exc:
        raise SystemExit(f"spacegraph spaces: {exc}") from None
    print(f"space:  {space!r}")
    for path, leaf in space.flatten().items():
        print(f"  {path or '<root>'}: {leaf!r}  full shape {leaf.full_shape()}")
    flat = space.flatten_value(value)
    for path, v in flat.items():
        arr = np.asarray(v)
        print(f"sample {path or '<root>'}: shape {arr.shape} dtype {arr.dtype} min {arr.min() if arr.size else '-'} "
              f"max {arr.max() if arr.size else '-'}")
    print(f"contained: {space.contains(value)}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `spacegraph` console script."""
    parser = argparse.ArgumentParser(prog="spacegraph", description=__doc__)
    verbose_help = "show TensorFlow's start-up and C++ log lines (off by default)"
    parser.add_argument("--verbose", dest="verbose_logs", action="store_true", help=verbose_help)
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="spaces, the Q-network on both backends and a short DQN CartPole run on each")
    demo.add_argument("--backend", action="append", choices=["tf", "torch"],
                      help="backend(s) to use (repeatable; default both)")
    demo.add_argument("--train-steps", type=int, default=4000,
                      help="env steps of the short DQN CartPole run per backend (0: skip it; default 4000)")
    demo.add_argument("--train-seconds", type=positive_float, default=15.0,
                      help="the most seconds of that run per backend (default 15)")
    demo.add_argument("--verbose", dest="verbose_logs", action="store_true", default=argparse.SUPPRESS,
                      help=verbose_help)
    demo.set_defaults(fn=cmd_demo)

    train = sub.add_parser("train", help="train an agent from a config; metrics, learning curve, checkpoints",
                           description="Train an agent from a config file with a vectorised worker: greedy "
                                       "evaluation every evaluation.every env steps, metrics.csv/.jsonl, "
                                       "episodes.csv, learning_curve.png and a checkpoint (at the end and on "
                                       "Ctrl-C; continue with --resume DIR).")
    train.add_argument("config", nargs="?", help="a config file, or a name in reference_agents/configs "
                                                 "(dqn_cartpole); optional with --resume")
    train.add_argument("--backend", choices=["tf", "torch"], help="overrides the config's backend")
    train.add_argument("--steps", type=positive_int, help=f"total env steps (default {DEFAULT_TRAIN_STEPS:,}; "
                                                            f"with --resume the saved total)")
    train.add_argument("--seed", type=int, help="overrides the config's seed")
    train.add_argument("--out", help="run directory (default runs/<config>-<backend>-<timestamp>); checked "
                                     "before any work: not a file, creatable, writable")
    train.add_argument("--resume", metavar="DIR", help="continue the run in DIR from its checkpoint (from "
                                                       "DIR/checkpoint.old, with a warning, when the newest "
                                                       "checkpoint is damaged)")
    train.add_argument("--eval-every", type=positive_int, help="env steps between evaluations "
                                                                "(default: the config's evaluation.every)")
    train.add_argument("--eval-episodes", type=positive_int, help="greedy episodes of the full evaluation, whose "
                                                                   "mean decides solved (evaluation.episodes)")
    train.add_argument("--screen-episodes", type=positive_int, help="greedy episodes of the screen played first; "
                                                                     "the full evaluation follows when its mean "
                                                                     "reaches the target (evaluation.screen_episodes)")
    train.add_argument("--eval-envs", type=positive_int, help="environments each evaluation runs in lockstep, "
                                                               "each a fixed quota of episodes (evaluation.envs)")
    train.add_argument("--target-return", type=finite_float,
                       help="solved (and stop) when the full evaluation's mean return reaches this "
                            "(evaluation.target_return; never from the screen alone)")
    train.add_argument("--checkpoint-every", type=positive_int, help="also checkpoint every N env steps")
    train.add_argument("--max-seconds", type=positive_float, help="stop after this many seconds of training")
    train.add_argument("--threads", type=positive_int, default=1, help="framework threads (default 1)")
    train.add_argument("--quiet", action="store_true", help="no progress bar and no per-evaluation lines")
    train.add_argument("--progress", action="store_true", help="draw the progress bar even when stderr is not "
                                                               "a terminal")
    train.add_argument("--no-tensorboard", action="store_true", help="write no TensorBoard scalars (default: "
                                                                     "event files in RUN/tensorboard/ beside the "
                                                                     "metrics; tensorboard --logdir RUN)")
    train.add_argument("--executor", choices=["local", "ray", "tf-dist", "seed"],
                       help="Ape-X (distributed prioritized replay): its workers and replay shards as Ray actors "
                            "(ray) or in this process (local); an 'agent: apex' config defaults to local. IMPALA "
                            "('agent: impala'): one process (local, the default), actor processes with TF servers "
                            "(tf-dist, --actors) or Ray actors (ray, --workers); seed: central batched inference, actors only "
                            "step environments (--actors; Ray with --address)")
    train.add_argument("--workers", type=positive_int, help="Ape-X acting workers (default: the config's "
                                                             "apex.workers); IMPALA on Ray: actors (default 2)")
    train.add_argument("--actors", type=positive_int, help="IMPALA on --executor tf-dist: actor processes "
                                                            "(default 2)")
    train.add_argument("--cluster-spec", help="IMPALA on --executor tf-dist: a JSON cluster spec {learner: "
                                              "[host:port], actor: [...]} instead of 127.0.0.1 and free ports. "
                                              "TensorFlow's servers listen on every interface and authenticate "
                                              "nothing: run the tasks on a private network only")
    train.add_argument("--publish-every", type=positive_int, help="IMPALA distributed: publish the learner's "
                                                                   "weights every N updates (default 1)")
    train.add_argument("--shards", type=positive_int, help="Ape-X prioritized replay shards (apex.shards)")
    train.add_argument("--address", help="join the Ray cluster at ADDR (host:port or auto) instead of starting "
                                         "one on 127.0.0.1 (which runs with token authentication and a token of "
                                         "its own); a cluster with token authentication takes its token as Ray "
                                         "reads it: RAY_AUTH_MODE=token and RAY_AUTH_TOKEN, or a file named by "
                                         "RAY_AUTH_TOKEN_PATH, or ~/.ray/auth_token")
    train.add_argument("--serve", metavar="HOST:PORT", help="IMPALA on --executor seed: start no actors; serve the "
                                                            "gRPC stream at HOST:PORT for --actors N actors started "
                                                            "elsewhere with `spacegraph actor --address HOST:PORT "
                                                            "--index I` (they reconnect to a learner restarted there "
                                                            "with --resume). Actors must prove they hold the token "
                                                            "(--token-file); a non-loopback address needs one")
    train.add_argument("--token-file", metavar="FILE", help="with --serve: the secret actors must prove they hold "
                                                            "(else $SPACEGRAPH_TOKEN; on a loopback address without "
                                                            "either, the run's own RUN/actor-token, made mode 0600)")
    train.add_argument("--tls-cert", metavar="PEM", help="with --serve: serve TLS with this certificate chain "
                                                         "(actors trust it with --tls-ca)")
    train.add_argument("--tls-key", metavar="PEM", help="with --serve: the private key of --tls-cert")
    train.add_argument("--verbose", dest="verbose_logs", action="store_true", default=argparse.SUPPRESS,
                      help=verbose_help)
    train.set_defaults(fn=cmd_train)

    add_actor_parser(sub)

    build = sub.add_parser("build", help="build a component and print its API table (and phase times)")
    build.add_argument("target", help="a class path (package.module.Class) or a YAML file with class/config/input_spaces")
    build.add_argument("--backend", action="append", choices=["tf", "torch"], help="repeatable; default tf")
    build.add_argument("--config", help="constructor keyword arguments as JSON")
    build.add_argument("--space", action="append", metavar="ARG=SPACE", help="input space of a root API argument")
    build.add_argument("--profile", action="store_true", help="median phase times over --repeats builds")
    build.add_argument("--repeats", type=int, default=5)
    build.add_argument("--json", action="store_true", help="print JSON")
    build.add_argument("--verbose", dest="verbose_logs", action="store_true", default=argparse.SUPPRESS,
                      help=verbose_help)
    build.set_defaults(fn=cmd_build)

    spaces = sub.add_parser("spaces", help="parse a space text, sample it and check containment")
    spaces.add_argument("text")
    spaces.add_argument("--size", type=int, default=None)
    spaces.add_argument("--seed", type=int, default=0)
    spaces.set_defaults(fn=cmd_spaces)

    from spacegraph.graph_cmd import add_graph_parser  # `spacegraph graph`: drawings and TensorBoard export

    add_graph_parser(sub, resolve_config, import_tensorflow_quietly, verbose_help)

    from harness.specs.cli import add_spec_parser

    add_spec_parser(sub, default_package="reference_agents")

    new = sub.add_parser("new", help="write a template component with its spec and an oracle stub")
    new_sub = new.add_subparsers(dest="new_command", required=True)
    new_component = new_sub.add_parser(
        "component", help="a template component, its spec and an oracle stub in a project",
        description="Writes PACKAGE/<name>.py (a component that builds and runs: scale * inputs), "
                    "specs/components/<name>.yaml and <name>_apply in PACKAGE/oracles.py, a stub that raises "
                    "until you write it: `spacegraph spec test specs` fails on the oracle check until then. "
                    "Writes pyproject.toml too when DIR has none. Existing files are never overwritten.")
    new_component.add_argument("name", metavar="NAME", help="the class name, in CapWords (e.g. MyLayer)")
    new_component.add_argument("--dir", default=".", help="the project folder (default: here)")
    new_component.add_argument("--package", help="the package to put it in (default: the one package in DIR, "
                                                 "else my_components)")
    new_component.set_defaults(fn=cmd_new_component)
    from spacegraph.report.cli import add_report_parser  # the `report` command (spacegraph/report/)
    add_report_parser(sub)

    args = parser.parse_args(argv)
    if args.command != "report":  # validate mode for every command but the report's measurements
        os.environ.setdefault("SPACEGRAPH_VALIDATE", "1")
    set_log_level(args.verbose_logs)
    if args.command == "spec" and args.spec_command == "test":
        chosen = args.backend or [b for b in os.environ.get("SPACEGRAPH_BACKENDS", "tf,torch").split(",") if b.strip()]
        if "tf" in [b.strip() for b in chosen]:
            import_tensorflow_quietly(args.verbose_logs)
    if getattr(args, "backend", None) is None and args.command in ("build", "demo"):
        args.backend = ["tf"] if args.command == "build" else ["tf", "torch"]
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
