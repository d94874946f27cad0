"""``spacegraph train``: its flags (`add_train_parser`) and the dispatch (`cmd_train`): the agent registry says
which agent a config or a resumed run holds (`reference_agents.agents.agent_kind`, `checkpoint_kind`), and
`train_command` picks the command that runs it: IMPALA (`impala`), Ape-X (`apex`), and every agent trained in
one process by a `Trainer` (`single`: DQN and users' agents named by dotted path)."""

from __future__ import annotations

import argparse
import os
from typing import Any, Callable

from spacegraph.arguments import finite_float, positive_float, positive_int
from spacegraph.logs import VERBOSE_HELP
from spacegraph.train.common import DEFAULT_TRAIN_STEPS, fail, out_dir_problem, trainer_options

#: The agents whose update ``--replicas`` replicates (Ape-X's: its learner's).
REPLICATED = ("dqn", "impala", "apex")
#: The flags only IMPALA's distributed executors take.
IMPALA_ONLY = ("cluster_spec", "publish_every", "serve", "token_file", "tls_cert", "tls_key", "actors")


def add_project_imports(path: str) -> None:
    """Makes a user's components and agents, named by dotted path in a config (or a resumed run's saved config),
    importable: the project root of ``path`` (`harness.specs.project`) goes on ``sys.path``, or, outside any
    project, the folder of ``path`` itself (a config file's, or the current one for a run directory)."""
    from harness.specs.project import add_import_folders, import_roots

    outside = [os.path.abspath(os.path.dirname(path) if os.path.isfile(path) else os.curdir)]
    add_import_folders(import_roots([path]) or outside)


def resumed_kind(directory: str) -> str | None:
    """The registered agent of a run directory's newest readable checkpoint (None: none readable; the resume
    then reports what is wrong)."""
    from reference_agents.agents import BadFileError, checkpoint_kind
    from reference_agents.training.checkpoints import checkpoint_dirs

    for ckpt in checkpoint_dirs(directory):
        try:
            return checkpoint_kind(ckpt)
        except BadFileError:
            continue
    return None


def train_command(kind: str) -> Callable[[argparse.Namespace, dict[str, Any]], int]:
    """The command that trains agents of registry ``kind`` (one-process `single` for DQN and users' agents)."""
    if kind == "impala":
        from spacegraph.train.impala import cmd_train_impala

        return cmd_train_impala
    if kind == "apex":
        from spacegraph.train.apex import cmd_train_apex

        return cmd_train_apex
    from spacegraph.train.single import cmd_train_single

    return cmd_train_single


def cmd_train(args: argparse.Namespace) -> int:
    """``spacegraph train``: checks the flags and the run folder, asks the registry which agent the config (or the
    resumed run) holds, and hands over to its command."""
    from reference_agents.agents import ConfigError, agent_kind, resolve_config_path

    if args.config is None and args.resume is None:
        return fail("give a CONFIG (a file or a name in reference_agents/configs, e.g. dqn_cartpole) or --resume DIR")
    problem = out_dir_problem(args)
    if problem:
        return fail(problem)
    if args.resume is not None and args.seed is not None:
        return fail("--seed cannot change a resumed run (its seed is in the checkpoint)")
    try:
        if args.resume is not None:
            add_project_imports(args.resume)
            kind = resumed_kind(args.resume) or "dqn"
        else:
            path = resolve_config_path(args.config)
            add_project_imports(path)
            kind = agent_kind(path)
    except ConfigError as exc:
        return fail(str(exc))
    if kind != "impala" and (args.executor in ("tf-dist", "seed")
                             or any(getattr(args, flag) is not None for flag in IMPALA_ONLY)):
        return fail("--executor tf-dist/seed, --actors, --cluster-spec, --serve (--token-file, --tls-*) and "
                    "--publish-every are for IMPALA configs (agent: impala; Ape-X publishes every "
                    "apex.publish_every learner updates)")
    if kind == "dqn" and args.executor is not None:
        kind = "apex"  # Ape-X over a DQN config: its workers and shards on the executor
    problem = replicas_problem(args, kind)
    if problem:
        return fail(problem)
    return train_command(kind)(args, trainer_options(args))


def replicas_problem(args: argparse.Namespace, kind: str) -> str | None:
    """What is wrong with ``--replicas`` / ``--replica-mode`` for agents of registry ``kind`` (None: fine)."""
    if args.replica_mode is not None and args.replicas is None:
        return (f"--replica-mode {args.replica_mode} needs --replicas N (the replicas of the update; a config "
                f"sets both in execution.strategy)")
    if args.replicas is not None and kind not in REPLICATED:
        return (f"--replicas is for the built-in agents' updates ({', '.join(REPLICATED)}); agent {kind!r} "
                f"chooses its own execution")
    return None


def add_train_parser(sub: Any) -> argparse.ArgumentParser:
    """Adds the ``train`` subcommand to an argparse subparsers object; returns its parser."""
    train = sub.add_parser("train", help="train an agent from a config; metrics, learning curve, checkpoints",
                           description="Train an agent from a config file with a vectorised worker: greedy "
                                       "evaluation every evaluation.every env steps, metrics.csv/.jsonl, "
                                       "episodes.csv, learning_curve.png, TensorBoard scalars (tensorboard/) "
                                       "and a checkpoint (at the end and on Ctrl-C; continue with --resume DIR).")
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
    train.add_argument("--replicas", type=positive_int, metavar="N",
                       help="run the update (DQN's, the IMPALA learner's, the Ape-X learner's) on N synchronous "
                            "replicas: execution.strategy {type: sync-replicas, replicas: N, mode: ...}; each "
                            "batch is split N ways and the gradients all-reduced. 1: local. With --resume: "
                            "replaces the run's saved strategy (default: keep it)")
    train.add_argument("--replica-mode", choices=["processes", "towers"],
                       help="with --replicas: one replica per process (processes; default unless the config says "
                            "towers) or towers in this process (towers)")
    train.add_argument("--quiet", action="store_true", help="no progress bar and no per-evaluation lines")
    train.add_argument("--progress", action="store_true", help="draw the progress bar even when stderr is not "
                                                               "a terminal")
    train.add_argument("--no-tensorboard", action="store_true", help="write no TensorBoard scalars (default: "
                                                                     "event files in RUN/tensorboard/ beside the "
                                                                     "metrics; tensorboard --logdir RUN)")
    train.add_argument("--executor", choices=["local", "ray", "tf-dist", "seed"],
                       help="Ape-X (distributed prioritized replay): its workers and replay shards as Ray actors "
                            "(ray) or in this process (local); an 'agent: apex' config defaults to local, an 'agent: dqn' "
                            "config with --executor runs Ape-X over it. IMPALA "
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
                      help=VERBOSE_HELP)
    train.set_defaults(fn=cmd_train)
    return train
