"""Act throughput report (RLgraph Fig. 5b): framework / hand-written ratios on both backends in one run.

The workload is `spacegraph.reports.act_throughput`'s: a Nature-DQN torso with a dueling
head, ``q_values(float32[B,84,84,4]) -> float32[B,6]``, called through the framework
(``executor.api_function``) and through a hand-written actor on the same backend with
the same weights. Every pair is checked to agree before it is timed.

Timing: per batch size, the contenders are timed in interleaved rounds (each round
times each contender for ``seconds / rounds``, the order alternating between rounds),
so slow drift and bursts of load from other processes hit both sides alike. Each round
is timed on the process's CPU time and on the wall clock; the headline ratio uses CPU
time, which other processes competing for the cores do not inflate. The headline ratio
is the median over rounds of framework / hand-written in the same round (the two run
back to back, so a burst of load that hits one round of one side is discarded); the
best-round rates, their ratio and the spread of the per-round ratios are reported too.

With ``diagnose=True`` the PyTorch side is also timed in the layout the framework's
`Conv2D` uses (a permute NHWC -> NCHW and back around every convolution, the kernel
passed as a permuted, non-contiguous view, the bias added after the convolution), and
in that layout with each of the two changes that remove the difference, to show where
the framework's PyTorch time goes.

Modules: `act_throughput` (the workload and the hand-written actors), `act_measure`
(timing and ratios), `act_diagnosis` (the PyTorch layout variants and op counts); this
one writes the report (Markdown, plot, command line) and re-exports their names.

Run ``python -m spacegraph.reports.act_report [--seconds S] [--diagnose]``; it writes
``reports/act_throughput.md``, ``.png`` and ``.json``.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from harness.measure.machine import configure_threads, environment, git_revision  # noqa: E402,F401
from harness.measure.tables import markdown_table  # noqa: E402
from harness.measure.timing import CLOCKS, interleaved_rates  # noqa: E402,F401
from spacegraph.reports.act_diagnosis import (  # noqa: E402,F401
    DIAGNOSIS_VARIANTS, conv_layout_actor, diagnose_torch_layout, op_counts)
from spacegraph.reports.act_measure import TARGET_RATIO, measure  # noqa: E402,F401
from spacegraph.reports.act_throughput import BACKENDS, BATCH_SIZES  # noqa: E402,F401

REPORT_DIR = Path(__file__).resolve().parents[2] / "reports"


def table(result: dict[str, Any]) -> str:
    """The Markdown table of ``result["rows"]``: one row per backend and batch size.

    Rates are the best round's calls per CPU-second; the headline ratio is the median of the
    per-round CPU ratios, with their range, the best rounds' ratio and the wall-clock median beside it.
    """
    header = ["backend", "batch", "framework calls/CPU-s", "hand-written calls/CPU-s",
              "framework / hand: median of rounds (CPU)", "range over rounds", "ratio of best rounds (CPU)",
              "median of rounds (wall clock)", "max abs diff"]
    rows = []
    for row in result["rows"]:
        cpu, wall = row["cpu"], row["wall"]
        flag = "" if row["ratio"] >= result["config"]["target_ratio"] else " (below target)"
        rows.append([row["backend"], row["batch"], f"{cpu['framework_calls_per_s']:.1f}",
                     f"{cpu['hand_calls_per_s']:.1f}", f"**{row['ratio']:.3f}**{flag}",
                     f"{cpu['ratio_min_of_rounds']:.3f}-{cpu['ratio_max_of_rounds']:.3f}", f"{cpu['ratio']:.3f}",
                     f"{wall['ratio_median_of_rounds']:.3f}", f"{row['max_abs_diff']:.1e}"])
    return markdown_table(header, rows)


def diagnosis_table(diagnosis: dict[str, Any]) -> str:
    """The Markdown table of the PyTorch layout diagnosis: calls per CPU-second, and the ratio to the hand-written."""
    names = ["framework"] + list(diagnosis["variants"])
    rows = [[row["batch"], *(f"{row[n]:.1f} ({row['ratios'][n]:.3f})" for n in names)] for row in diagnosis["rows"]]
    return markdown_table(["batch", *names], rows)


def op_count_table(counts: dict[str, dict[str, Any]]) -> str:
    """Markdown: per backend, the ops per call of the framework and the hand-written actor, and the difference."""
    rows = []
    for backend, c in counts.items():
        fw, hand = c["framework"], c["hand"]
        extra = {op: n - hand["by_op"].get(op, 0) for op, n in fw["by_op"].items() if n > hand["by_op"].get(op, 0)}
        rows.append([backend, fw["total"], hand["total"], ", ".join(f"{op} {n}" for op, n in fw["by_op"].items()),
                     ", ".join(f"{op} +{n}" for op, n in extra.items()) or "none"])
    return markdown_table(["backend", "framework ops", "hand-written ops", "framework ops by type",
                           "extra ops in the framework"], rows)


def summary(result: dict[str, Any]) -> list[str]:
    """Sentences read off the numbers: which settings meet the target, and what the diagnosis shows."""
    target = result["config"]["target_ratio"]
    rows = result["rows"]
    below = [r for r in rows if r["ratio"] < target]
    lines = [f"- {len(rows) - len(below)} of {len(rows)} settings reach framework / hand-written >= {target}."]
    for backend in result["config"]["backends"]:
        ratios = [r["ratio"] for r in rows if r["backend"] == backend]
        misses = [f"batch {r['batch']} ({r['ratio']:.3f})" for r in below if r["backend"] == backend]
        lines.append(f"- {backend}: ratios {min(ratios):.3f}-{max(ratios):.3f}; "
                     + (f"below target at {', '.join(misses)}." if misses else "at or above target everywhere."))
    diagnosis = result.get("diagnosis")
    if diagnosis:
        for backend, c in (diagnosis.get("op_counts") or {}).items():
            lines.append(f"- {backend}: one framework call runs {c['framework']['total']} ops, the hand-written "
                         f"actor {c['hand']['total']}.")
        for row in diagnosis["rows"]:
            r = row["ratios"]
            lines.append(f"- torch, batch {row['batch']}: framework {r['framework']:.3f} of hand-written; "
                         f"Conv2D's layout by hand {r['conv2d-layout']:.3f}, with the bias fused "
                         f"{r['+fused-bias']:.3f}, with a contiguous kernel {r['+contiguous-kernel']:.3f}, "
                         f"with both {r['+both']:.3f}.")
    return lines


def markdown(result: dict[str, Any]) -> str:
    """The whole report: result table, reading, method, diagnosis, environment, how to reproduce."""
    cfg, env = result["config"], result["environment"]
    parts = [
        "# Act throughput: framework vs hand-written actors (RLgraph Fig. 5b)",
        "",
        f"Workload: a Nature-DQN torso (three 'valid' convolutions, dense 512) with a dueling head, "
        f"`q_values({cfg['state_space']}) -> float32[B,{cfg['num_actions']}]`, at batch "
        f"{', '.join(map(str, cfg['batch_sizes']))}, on "
        f"{' and '.join('TensorFlow' if b == 'tf' else 'PyTorch' for b in cfg['backends'])}. "
        f"**Target (issue): framework / hand-written >= {cfg['target_ratio']} at every batch size.**",
        "",
        "## Result",
        "",
        table(result),
        "",
        "![framework / hand-written ratio per batch size](act_throughput.png)",
        "",
        "## Reading (generated from the numbers above)",
        "",
        *summary(result),
        "",
        "## How it was measured",
        "",
        "- **framework**: `GraphExecutor(QActor(), ...).api_function(\"q_values\")` called with a backend "
        "tensor (on TF a `tf.function` with an input signature traced at build; on PyTorch the flat call "
        "chain under `no_grad`).",
        "- **hand-written**: the same network written directly against the backend "
        "(`spacegraph.reports.act_throughput.hand_written`: TF `tf.function` with `tf.nn.conv2d` on NHWC; "
        "PyTorch `torch.nn.functional` with one NHWC -> NCHW permute per call and OIHW kernels made once), "
        "holding the framework's weights. Before timing, both are called on the same states and must agree "
        "(rtol 1e-4, atol 1e-5); the largest difference is in the last column.",
        "- States are uniform `float32[B,84,84,4]`; the `uint8 -> float32` conversion an Atari actor does is "
        "left out on both sides.",
        f"- Timing: per batch size, {cfg['rounds']} interleaved rounds, {cfg['seconds'] / cfg['rounds']:.2f} s "
        f"(wall clock) per contender per round ({cfg['seconds']:.1f} s each in all), order alternating between "
        "rounds. Each round is timed on two clocks: the process's CPU time (`time.process_time`) and the wall "
        "clock. **The headline ratio uses CPU time**: this machine is shared, and CPU time counts only the "
        "work this process did, so another process taking the cores does not show up as framework overhead "
        "(with one thread per framework, calls per CPU-second is what one dedicated core would do). It is "
        "the median over rounds of framework / hand-written within a round (the two timed back to back), "
        "which discards rounds where a burst of load hit one side only. Rates are the best round's; the "
        "ratio of the best rounds and the wall-clock median are given for comparison; the range over rounds "
        "shows how much single rounds vary on this machine.",
        f"- Threads: {cfg['threads']} (one per framework by default, as the paper's single-threaded worker; "
        "with two threads and other processes on the two cores, PyTorch's thread pool stalls and rates "
        "drop by up to 10x).",
        "",
    ]
    if result.get("diagnosis"):
        diag = result["diagnosis"]
        parts += [
            "## PyTorch: where the framework's time goes",
            "",
            "`Conv2D`'s PyTorch body (`reference_agents/components/nn/conv2d.py`) permutes its input "
            "NHWC -> NCHW and its output back at every layer, passes the kernel as "
            "`kernel.permute(3, 2, 0, 1)` (a non-contiguous view) and adds the bias after the "
            "convolution. The actors below are written by hand with the same weights; calls per CPU-second "
            "(best round) and, in brackets, the median over rounds of the ratio to the hand-written actor:",
            "",
            diagnosis_table(diag),
            "",
            *[f"- `{name}`: {text}" for name, text in diag["variants"].items()],
            "",
        ]
        if diag.get("op_counts"):
            parts += [
                "## Ops per call (a count, not a timing)",
                "",
                "What one call runs, framework and hand-written (PyTorch: top-level ATen ops one call "
                "dispatches; TensorFlow: nodes of the traced graph other than Const, Placeholder, NoOp, "
                "Identity). Each op costs a dispatch (a few µs), which is what a small batch pays for:",
                "",
                op_count_table(diag["op_counts"]),
                "",
            ]
    parts += [
        "## Environment",
        "",
        f"- date: {env['date']}; git revision: `{env['git_revision']}`",
        f"- machine: {env['machine']} ({env['processor']}), no GPU",
        f"- Python {env['python']}, NumPy {env['numpy']}, TensorFlow {env['tensorflow']}, PyTorch {env['torch']}",
        f"- load average (1, 5, 15 min) before: {env['load_average_before']}, after: {env['load_average_after']} "
        f"(the machine is shared; a load above the core count means other processes competed); "
        f"the run took {env['measurement_seconds']} s",
        "- raw numbers: `reports/act_throughput.json`",
        "",
        "## Reproduce",
        "",
        "```",
        "cd /work/main",
        f"PYTHONPATH=. .venv/bin/python -m spacegraph.reports.act_report --seconds {cfg['seconds']:g} "
        f"--rounds {cfg['rounds']}" + (" --diagnose" if result.get("diagnosis") else ""),
        "```",
        "",
        "The asv benchmark with the same workload: `asv_bench/benchmarks/act.py` (`ActThroughput.track_ratio`).",
        "",
    ]
    return "\n".join(parts)


def plot(result: dict[str, Any], path: str | Path) -> None:
    """A PNG: framework / hand-written ratio per batch size and backend (bars), with the target line.

    Raises:
        ImportError: when matplotlib is not installed.
    """
    from harness.measure.files import pyplot

    plt = pyplot("act_report.plot")
    cfg = result["config"]
    batches, backends = cfg["batch_sizes"], cfg["backends"]
    fig, (ax_ratio, ax_rate) = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.8 / len(backends)
    x = np.arange(len(batches))
    for i, backend in enumerate(backends):
        rows = {r["batch"]: r for r in result["rows"] if r["backend"] == backend}
        ratios = [rows[b]["ratio"] for b in batches]
        bars = ax_ratio.bar(x + (i - (len(backends) - 1) / 2) * width, ratios, width, label=backend)
        ax_ratio.bar_label(bars, fmt="%.2f", fontsize=8)
        ax_rate.plot(batches, [rows[b]["cpu"]["framework_calls_per_s"] * b for b in batches], "o-",
                     label=f"{backend} framework")
        ax_rate.plot(batches, [rows[b]["cpu"]["hand_calls_per_s"] * b for b in batches], "s--",
                     label=f"{backend} hand-written")
    ax_ratio.axhline(1.0, color="grey", linewidth=0.8)
    ax_ratio.axhline(cfg["target_ratio"], color="red", linestyle=":", label=f"target {cfg['target_ratio']}")
    ax_ratio.set_xticks(x, [str(b) for b in batches])
    ax_ratio.set_xlabel("batch size")
    ax_ratio.set_ylabel("framework / hand-written (CPU time)")
    ax_ratio.set_title("Act throughput ratio (higher is better)")
    ax_ratio.legend(fontsize=8)
    ax_rate.set_xscale("log", base=2)
    ax_rate.set_xticks(batches, [str(b) for b in batches])
    ax_rate.set_yscale("log")
    ax_rate.set_xlabel("batch size")
    ax_rate.set_ylabel("states acted on per CPU-second")
    ax_rate.set_title("Throughput")
    ax_rate.legend(fontsize=7)
    fig.suptitle(f"Dueling Nature DQN act throughput, {result['environment']['date']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(result: dict[str, Any], out_dir: str | Path = REPORT_DIR, stem: str = "act_throughput") -> dict[str, Path]:
    """Writes ``<stem>.md``, ``<stem>.png`` and ``<stem>.json`` into ``out_dir``; returns their paths."""
    from harness.measure.files import write_report

    return write_report(result, out_dir, stem, markdown, plot)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command line: measure, write the report files, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--batch-sizes", default=",".join(map(str, BATCH_SIZES)))
    parser.add_argument("--seconds", type=float, default=3.0, help="time per contender per batch size")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--diagnose", action="store_true", help="also time the PyTorch Conv2D layout variants")
    parser.add_argument("--out-dir", default=str(REPORT_DIR))
    parser.add_argument("--from-json", help="rewrite the report from a result JSON instead of measuring")
    args = parser.parse_args(argv)
    if args.from_json:
        result = json.loads(Path(args.from_json).read_text())
    else:
        result = measure(tuple(args.backends.split(",")), tuple(int(b) for b in args.batch_sizes.split(",")),
                         seconds=args.seconds, rounds=args.rounds, threads=args.threads, diagnose=args.diagnose)
    paths = write(result, args.out_dir)
    print(table(result))
    if result["diagnosis"]:
        print(diagnosis_table(result["diagnosis"]))
    print("\n".join(summary(result)))
    print(f"wrote {', '.join(str(p) for p in paths.values())}")
    return result


if __name__ == "__main__":
    main()
