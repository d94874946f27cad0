"""DQN learning against RLlib on CartPole-v1: env steps and wall seconds to a greedy mean return of 475.

The target of issue 6 (a report, not a test): our DQN takes fewer environment steps
and at most half the wall time of RLlib's DQN to reach the same return on the same
machine, measured side by side.

Sides:

* ``ours_tf`` / ``ours_torch``: ``build_agent("dqn_cartpole", backend, seed)`` trained by
  ``VectorEnvWorker.for_agent(agent)`` in chunks of ``eval_every`` env steps;
* ``rllib``: RLlib's DQN (new API stack, PyTorch) with the settings of its tuned example
  ``rllib/tuned_examples/dqn/cartpole_dqn.py`` (`RLLIB_SETTINGS`), one local env runner
  (``num_env_runners=0``) and a local learner, in a Ray instance this module starts on
  127.0.0.1 and shuts down; ``algo.train()`` iterations of ``eval_every`` sampled env steps.

Every ``eval_every`` env steps (evaluation steps are not training steps) the greedy policy
plays the same evaluation episodes on every side (`greedy_returns`: episode ``i`` reset with
seed ``eval_seed + i``): 10 screening episodes, and when their mean reaches ``min_return``
all 100; the run is solved when the 100-episode mean reaches ``min_return`` (the criterion
of the learning test in ``suites/agents/test_agent_specs.py``). Ours acts with
``agent.get_actions(obs, explore=False)``, RLlib with its RLModule's ``forward_inference``.

Each run is a fresh subprocess (one side, one seed) with one framework thread
(``OMP_NUM_THREADS=1``, ``torch.set_num_threads(1)``, TensorFlow's pools 1), bounded by an
env-step and a wall-time budget; runs are interleaved (seed 0 of every side, then seed 1, ...)
so that load from other processes on a shared machine hits all sides alike, and the 1-minute
load average is recorded at every evaluation.

Modules: `learning_criterion` (criterion, budget, evaluation), `learning_sides` (ours and
RLlib), `learning_runs` (runs in subprocesses), `learning_ratios` (ratios and verdicts),
`learning_report` (Markdown and plot); this one is the command line (and a run's child
process) and re-exports their names.

Run ``python -m spacegraph.reports.learning_peers [--seeds 0,1] [--budget-steps N] [--budget-seconds S]``;
it writes ``reports/dqn_learning_vs_rllib.md``, ``.png`` and ``.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from harness.measure.machine import uncommitted  # noqa: E402,F401
from spacegraph.reports.learning_criterion import (  # noqa: E402,F401
    AGENT_CONFIG, ENV_ID, OURS, REPO, SIDE_TITLES, SIDES, Budget, Criterion, check_side, eval_seed, evaluate,
    greedy_returns)
from spacegraph.reports.learning_ratios import (  # noqa: E402,F401
    METRIC_TITLES, TARGETS, compare, fmt_ratio, ratio, run_value, verdict)
from spacegraph.reports.learning_report import (  # noqa: E402,F401
    REPORT_DIR, STEM, criterion_flags, markdown, plot, ratio_table, reading, runs_table, settings_table, write)
from spacegraph.reports.learning_runs import (  # noqa: E402,F401
    measure, run_isolated, run_line, run_one, train_until_solved)
from spacegraph.reports.learning_sides import (  # noqa: E402,F401
    RLLIB_SETTINGS, THREAD_ENV, OursSide, RLlibSide, limit_threads, rllib_missing)


def _child(args: argparse.Namespace) -> None:
    """``--one``: one run in this process, its result written to ``--result``; SIGTERM unwinds (Ray shuts down)."""
    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"learning_peers: signal {signum}")

    signal.signal(signal.SIGTERM, stop)
    criterion = Criterion(args.min_return, args.eval_episodes, args.screen_episodes, args.eval_every)
    run = run_one(args.one, args.seed, criterion, Budget(args.budget_steps, args.budget_seconds))
    Path(args.result).write_text(json.dumps(run))


def main(argv: list[str] | None = None) -> dict[str, Any] | None:
    """Command line: measure every side on every seed and write the report (or one run with ``--one``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1", help="comma-separated run seeds")
    parser.add_argument("--sides", default=",".join(SIDES))
    parser.add_argument("--budget-steps", type=int, default=Budget.env_steps)
    parser.add_argument("--budget-seconds", type=float, default=Budget.seconds)
    parser.add_argument("--eval-every", type=int, default=Criterion.eval_every)
    parser.add_argument("--eval-episodes", type=int, default=Criterion.eval_episodes)
    parser.add_argument("--screen-episodes", type=int, default=Criterion.screen_episodes)
    parser.add_argument("--min-return", type=float, default=Criterion.min_return)
    parser.add_argument("--out-dir", default=str(REPORT_DIR))
    parser.add_argument("--rewrite", metavar="JSON", help="only rewrite the .md and .png from a result JSON")
    parser.add_argument("--note", action="append", default=[],
                        help="a hand-written note for the report's Notes section (repeatable; kept in the JSON)")
    parser.add_argument("--one", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        _child(args)
        return None
    if args.rewrite:
        result = json.loads(Path(args.rewrite).read_text())
        result["comparison"] = compare(result)
    else:
        criterion = Criterion(args.min_return, args.eval_episodes, args.screen_episodes, args.eval_every)
        result = measure(tuple(int(s) for s in args.seeds.split(",")), tuple(args.sides.split(",")), criterion,
                         Budget(args.budget_steps, args.budget_seconds))
    result["notes"] = [*result.get("notes", []), *args.note]
    paths = write(result, args.out_dir)
    if result["comparison"]:
        print(ratio_table(result))
    print("\n".join(reading(result)))
    print(f"wrote {', '.join(str(p) for p in paths.values())}")
    return result


if __name__ == "__main__":
    main()
