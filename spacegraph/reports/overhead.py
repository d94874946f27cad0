"""Framework overhead report (issue 18): act, update and start-up against hand-written code, in one run.

``python -m spacegraph.reports.overhead [--out reports] [--repeats 2] [--seconds 2]`` writes
``overhead.json`` and ``overhead.md``:

- act: framework/hand calls/s of the dueling Nature-DQN actor (`act_measure.measure`,
  interleaved rounds, median of the per-round CPU-time ratios) at batch 1, 4, 16, 64;
- update: hand/framework time of one DQN update at batch 32, CartPole's MLP and Pong's Nature CNN
  (`update_overhead`, interleaved rounds, median of the CPU-time rates);
- sampling: frames/CPU-s of our worker acting (not observing) over the same vector environment stepped
  by a hand-written loop calling the same Q-network (`sampling_overhead`, interleaved rounds, median of
  the per-round CPU-time ratios), CartPole and Pong at 1, 4 and 16 environments; the worker observing
  too is shown beside it, and the worker acting through the hand-written act of the loop (its own cost
  without the framework's act); on PyTorch, also the worker acting through an agent whose ``act`` is
  traced (``execution.trace: [act]``, own rows) and one whose methods run step by step
  (``execution.replay: false``, own rows: the default replays them);
- start-up: seconds to the first progress line of ``spacegraph train dqn_cartpole``
  (`startup_time`), the median of ``STARTUP_PAIRS`` fresh processes per repeat, each paired with a
  fresh process importing the framework alone (`import_seconds`, taken right before or after it);
  the per-pair differences give the framework's own start-up, after the import.

Each act/update measurement is repeated ``--repeats`` times to show the spread; the load
average at start and end is recorded (the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

TARGETS = {"act": 0.95, "update": 0.9, "sampling": 0.85, "startup_s": 3.0}
#: The sampling comparison's points: config and numbers of environments.
SAMPLING_POINTS = {"cartpole": (1, 4, 16), "pong": (1, 4, 16)}
#: Start-up and import-alone pairs per repeat (`measure`): the start-up rows are medians over all pairs.
STARTUP_PAIRS = 3
#: The update's networks (`update_overhead.CONFIGS`) with their row labels.
UPDATE_NETWORKS = {"cartpole": "CartPole MLP", "nature": "Nature CNN (Pong frames)"}


def measure(backends: tuple[str, ...] = ("tf", "torch"), repeats: int = 2, seconds: float = 2.0,
            batch_sizes: tuple[int, ...] = (1, 4, 16, 64), sampling_points: dict | None = None) -> dict[str, Any]:
    """All figures of the report (see the module docstring)."""
    from spacegraph.reports import act_measure, sampling_overhead, update_overhead
    from harness.measure.machine import uncommitted
    from spacegraph.reports.startup_time import first_progress_seconds

    load0, t0 = os.getloadavg(), time.perf_counter()
    act: dict[str, dict[int, list[float]]] = {b: {n: [] for n in batch_sizes} for b in backends}
    update: dict[str, dict[str, list[float]]] = {n: {b: [] for b in backends} for n in UPDATE_NETWORKS}
    startup: dict[str, list[float]] = {b: [] for b in backends}
    points = SAMPLING_POINTS if sampling_points is None else sampling_points
    sampling: dict[str, dict[str, dict[str, list[float]]]] = {
        f"{config}-{n}": {b: {"act": [], "observing": [], "hand_act": [], "traced_act": [],
                                 "eager_act": []} for b in backends}
        for config, ns in points.items() for n in ns}
    imports: dict[str, list[float]] = {b: [] for b in backends}
    imports_plain: dict[str, list[float]] = {b: [] for b in backends if b == "tf"}
    for _ in range(repeats):
        result = act_measure.measure(backends, batch_sizes, seconds=seconds, rounds=6)
        for row in result["rows"]:
            act[row["backend"]][row["batch"]].append(row["ratio"])
        for network in UPDATE_NETWORKS:
            for b in backends:
                update[network][b].append(update_overhead.measure(b, 32, seconds=seconds, rounds=6,
                                                                  network=network)["ratio"])
        for config, ns in points.items():
            for n in ns:
                for b in backends:
                    point = sampling_overhead.measure(b, config, n, seconds=seconds, rounds=4)
                    sampling[f"{config}-{n}"][b]["act"].append(point["worker_act_over_direct"])
                    sampling[f"{config}-{n}"][b]["observing"].append(point["worker_over_direct"])
                    sampling[f"{config}-{n}"][b]["hand_act"].append(point["worker_hand_over_direct"])
                    if point["worker_traced_over_direct"] is not None:  # PyTorch only
                        sampling[f"{config}-{n}"][b]["traced_act"].append(point["worker_traced_over_direct"])
                    if point.get("worker_eager_over_direct") is not None:  # PyTorch only
                        sampling[f"{config}-{n}"][b]["eager_act"].append(point["worker_eager_over_direct"])
        for b in backends:
            # start-up and the import alone in pairs, taken one right after the other (in turn first), so that
            # each pair's difference, the framework's own start-up, sees the host at about one speed
            for i in range(STARTUP_PAIRS):
                if i % 2:
                    imports[b].append(import_seconds(b))
                    startup[b].append(first_progress_seconds(b))
                else:
                    startup[b].append(first_progress_seconds(b))
                    imports[b].append(import_seconds(b))
            if b in imports_plain:
                imports_plain[b].append(import_seconds(b, plain=True))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = uncommitted(["harness", "reference_agents", "spacegraph"])
    return {"act": act, "update": update, "sampling": sampling, "startup": startup, "imports": imports,
            "imports_plain": imports_plain, "targets": TARGETS,
            "repeats": repeats, "seconds": seconds, "commit": commit, "uncommitted": dirty, "load_before": load0,
            "load_after": os.getloadavg(),
            "minutes": (time.perf_counter() - t0) / 60}


#: The framework import as spacegraph does it (TensorFlow without its eager Keras import), and plainly.
_IMPORTS = {"tf": "from harness.backends.tf_import import import_tensorflow; import_tensorflow()",
            "torch": "import torch"}
_PLAIN_IMPORTS = {"tf": "import tensorflow", "torch": "import torch"}


def import_seconds(backend: str, plain: bool = False) -> float:
    """Seconds a fresh interpreter takes to import the backend's framework alone (the floor of start-up).

    TensorFlow is imported as spacegraph imports it (`harness.backends.tf_import.import_tensorflow`),
    or with a plain ``import tensorflow`` when ``plain``. The time is taken when the child says the import
    is done (`startup_time.seconds_until_output`), as start-up is taken at the first progress line: the
    interpreter's exit after it (TensorFlow's teardown, 0.1-0.5 s here) is not counted on either side.

    Raises:
        RuntimeError: when the child ends before its import is done (with its stderr).
    """
    import sys

    from spacegraph.reports.startup_time import seconds_until_output

    code = (_PLAIN_IMPORTS if plain else _IMPORTS)[backend]
    said = "; import sys; print('spacegraph: imported', file=sys.stderr, flush=True)"
    return seconds_until_output([sys.executable, "-c", code + said], b"spacegraph: imported",
                                f"import_seconds({backend!r}): {code!r} did not finish its import",
                                env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))


def _cell(values: list[float], target: float, higher_is_better: bool = True) -> str:
    med = statistics.median(values)
    met = med >= target if higher_is_better else med <= target
    return f"{_spread(values)} {'met' if met else 'NOT met'}"


def _spread(values: list[float]) -> str:
    """The median of ``values`` with their min-max in brackets (no target)."""
    spread = f" ({min(values):.2f}-{max(values):.2f})" if len(values) > 1 else ""
    return f"{statistics.median(values):.2f}{spread}"


def _hand(by_backend: dict[str, list[float]]) -> str:
    return f" [{statistics.median(by_backend['hand_act']):.2f}]" if by_backend.get("hand_act") else ""


def _tree(r: dict[str, Any]) -> str:
    """What the code measured was beside the commit: its uncommitted changes under the measured packages."""
    dirty = r.get("uncommitted", ())
    if dirty is None:
        return " (git status unknown)"
    return f" with uncommitted changes ({', '.join(line[3:] for line in dirty)})" if dirty else ""


def markdown(r: dict[str, Any]) -> str:
    """The report as Markdown."""
    backends = list(r["startup"])
    t = r["targets"]
    lines = ["# Framework overhead against hand-written code (issue 18)", "",
             f"Commit `{r['commit']}`{_tree(r)}, CPU only, 1 framework thread, the shared 2-core dev VM; "
             f"load average {r['load_before'][0]:.1f} at start, {r['load_after'][0]:.1f} at the end "
             f"({r['minutes']:.1f} min). Every figure is the median of {r['repeats']} repeats "
             "(min-max in brackets); act and sampling ratios are medians of the per-round ratios, the update ratio "
             "that of the two median rates, over interleaved rounds of CPU time "
             f"({r['seconds']} s per contender).", "",
             "| measure | target | " + " | ".join(backends) + " |", "|---|---|" + "---|" * len(backends)]
    first = backends[0]
    for batch in r["act"][first]:
        lines.append(f"| act framework/hand, batch {batch} | >= {t['act']} | "
                     + " | ".join(_cell(r["act"][b][batch], t["act"]) for b in backends) + " |")
    for network, label in UPDATE_NETWORKS.items():
        if network in r["update"]:
            lines.append(f"| update hand/framework, {label}, batch 32 | >= {t['update']} | "
                         + " | ".join(_cell(r["update"][network][b], t["update"]) for b in backends) + " |")
    for point, by_backend in r.get("sampling", {}).items():
        config, n = point.rsplit("-", 1)
        lines.append(f"| sampling worker/direct loop, {config.capitalize()}, {n} env(s): acting "
                     f"(observing too) [hand-written act] | >= {t['sampling']} | "
                     + " | ".join(f"{_cell(by_backend[b]['act'], t['sampling'])} "
                                  f"({statistics.median(by_backend[b]['observing']):.2f})" + _hand(by_backend[b])
                                  for b in backends) + " |")
    # PyTorch-only rows: the traced act (held to the target) and the act step by step (for comparison)
    for key, label, target in (("traced_act", "acting, `act` traced (`execution.trace: [act]`)", t["sampling"]),
                               ("eager_act", "acting step by step, no replays (`execution.replay: false`)", None)):
        for point, by_backend in r.get("sampling", {}).items():
            if any(by_backend[b].get(key) for b in backends):
                config, n = point.rsplit("-", 1)
                cells = [("-" if not by_backend[b].get(key) else _spread(by_backend[b][key]) if target is None
                          else _cell(by_backend[b][key], target)) for b in backends]
                lines.append(f"| sampling worker/direct loop, {config.capitalize()}, {n} env(s): {label} | "
                             f"{'-' if target is None else f'>= {target}'} | " + " | ".join(cells) + " |")
    lines.append(f"| start-up: `spacegraph train dqn_cartpole` to first progress line (s) | <= {t['startup_s']} | "
                 + " | ".join(_cell(r["startup"][b], t["startup_s"], False) for b in backends) + " |")
    if r.get("imports"):
        plain = r.get("imports_plain") or {}
        lines.append("| of which: the framework's import alone in a fresh interpreter, as spacegraph imports it "
                     "(TensorFlow without its eager Keras import; a plain `import tensorflow` in brackets) (s) | - | "
                     + " | ".join(f"{statistics.median(r['imports'][b]):.2f}"
                                  + (f" [{statistics.median(plain[b]):.2f}]" if plain.get(b) else "")
                                  for b in backends) + " |")
        if all(len(r["imports"][b]) == len(r["startup"][b]) for b in backends):
            lines.append("| of which: after the import (start-up minus the import alone, per pair taken one right "
                         "after the other) (s) | - | "
                         + " | ".join(_spread([s - i for s, i in zip(r["startup"][b], r["imports"][b])])
                                      for b in backends) + " |")
    lines += ["", "Not measured here: wall-clock to solved against RLlib (`reports/dqn_learning_vs_rllib.md`). "
              "Sampling: the worker acting through the framework, not observing, against a hand-written loop "
              "doing the same (the Q-network called directly, epsilon-greedy in NumPy, the same `VectorEnv`); "
              "in brackets the worker observing too (n-step folding and replay insert); in square brackets the worker "
              "acting through the loop's own hand-written act (what the worker's stepping and bookkeeping cost without "
              "the framework's act: the most the framework's act could reach). The traced rows: the same worker acting through an agent whose `act` runs as a TorchScript graph (`execution.trace: [act]`, PyTorch only: on TF every method is a `tf.function` graph already). "
              "On PyTorch the first rows' act runs as replays of its recorded calls (the default, "
              "`execution.replay`); the step-by-step rows turn them off, for comparison (no target). Start-up is wall-clock time of a fresh process and "
              "moves with the machine's load (the framework import alone is most of it).", "",
              *(["Notes:", "", *(f"- {n}" for n in r["notes"]), ""] if r.get("notes") else []),
              "Rebuild: `OMP_NUM_THREADS=1 python -m spacegraph.reports.overhead --out reports --repeats 2`; "
              "the same comparisons run in asv as `act.ActThroughput.track_ratio`, "
              "`update.DQNUpdate.track_hand_over_framework`, `sampling.SamplingOverhead.track_act_over_direct` and "
              "`startup.TrainStartup.track_first_progress_seconds`.",
              ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m spacegraph.reports.overhead", description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="reports")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--backends", default="tf,torch")
    parser.add_argument("--note", action="append", default=[], help="a note for the report (repeatable)")
    args = parser.parse_args(argv)
    result = measure(tuple(args.backends.split(",")), args.repeats, args.seconds)
    result["notes"] = list(args.note)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "overhead.json").write_text(json.dumps(result, indent=1, default=str))
    (out / "overhead.md").write_text(markdown(result))
    print(markdown(result))
    return result


if __name__ == "__main__":
    main()
