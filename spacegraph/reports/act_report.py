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

Run ``python -m spacegraph.reports.act_report [--seconds S] [--diagnose]``; it writes
``reports/act_throughput.md``, ``.png`` and ``.json``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from spacegraph.reports.act_throughput import (  # noqa: E402
    _CONVS, NUM_ACTIONS, STATE_SPACE, _weight, build, hand_written, setup_pair)

BACKENDS = ("tf", "torch")
BATCH_SIZES = (1, 4, 16, 64)
#: The issue's target: framework / hand-written at least this at every batch size.
TARGET_RATIO = 0.95
REPORT_DIR = Path(__file__).resolve().parents[2] / "reports"
#: The PyTorch actors of the diagnosis, in table order: (name, description).
DIAGNOSIS_VARIANTS = (
    ("hand-written", "the hand-written actor: one permute to NCHW per call, OIHW kernels, bias inside conv2d"),
    ("conv2d-layout", "Conv2D's layout by hand: permute NHWC->NCHW and back around every convolution, "
                      "kernel.permute(3, 2, 0, 1) view, bias added after"),
    ("+fused-bias", "Conv2D's layout with the bias passed to conv2d"),
    ("+contiguous-kernel", "Conv2D's layout with kernel.permute(3, 2, 0, 1).contiguous() (a copy per call)"),
    ("+both", "Conv2D's layout with both changes"),
)


def configure_threads(threads: int) -> dict[str, int | None]:
    """Limits TensorFlow's and PyTorch's CPU thread pools to ``threads`` each, where still possible.

    TensorFlow accepts the setting only before its runtime starts; when it has already
    started, its current setting is kept and reported.

    Args:
        threads: threads per framework (intra-op; TensorFlow's inter-op pool too).

    Returns:
        ``{"torch": n, "tf_intra_op": n, "tf_inter_op": n}``; 0 for TensorFlow means its default
        (all cores); None where the framework is not installed.

    Raises:
        ValueError: when ``threads`` is not a positive int.
    """
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"configure_threads: threads must be a positive int; got {threads!r}")
    out: dict[str, int | None] = {"torch": None, "tf_intra_op": None, "tf_inter_op": None}
    try:
        import torch
        torch.set_num_threads(threads)
        out["torch"] = torch.get_num_threads()
    except ImportError:
        pass
    try:
        import tensorflow as tf
    except ImportError:
        return out
    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    except RuntimeError:  # the runtime is already initialized: keep what it has
        pass
    out["tf_intra_op"] = tf.config.threading.get_intra_op_parallelism_threads()
    out["tf_inter_op"] = tf.config.threading.get_inter_op_parallelism_threads()
    return out


#: The clocks every round is timed on: the process's CPU time (``time.process_time``: what the
#: work costs, insensitive to other processes competing for the cores) and wall-clock time.
CLOCKS = ("cpu", "wall")


def _round_rate(fn: Callable[[], Any], seconds: float) -> dict[str, float]:
    """Calls per CPU-second and per wall-clock second of ``fn`` over one round of about ``seconds`` (wall)."""
    n, wall0, cpu0 = 0, time.perf_counter(), time.process_time()
    while True:
        fn()
        n += 1
        wall = time.perf_counter() - wall0
        if n >= 2 and wall >= seconds:
            cpu = max(time.process_time() - cpu0, 1e-9)
            return {"cpu": n / cpu, "wall": n / wall}


def interleaved_rates(fns: dict[str, Callable[[], Any]], seconds: float, rounds: int,
                      warmup: int = 3) -> dict[str, dict[str, list[float]]]:
    """Per contender and clock, its calls/s in each of ``rounds`` interleaved rounds of ``seconds / rounds``.

    Each contender is called ``warmup`` times first. The order of the contenders is
    reversed every other round, so that none always runs right after another.

    Args:
        fns: contender name -> a no-argument callable.
        seconds: the (wall-clock) time each contender gets in all.
        rounds: the number of rounds (>= 1).
        warmup: calls per contender before the first round.

    Returns:
        ``{name: {"cpu": [calls per CPU-second of round 0, ...], "wall": [calls per second, ...]}}``.

    Raises:
        ValueError: when ``fns`` is empty, ``seconds`` is not positive or ``rounds`` < 1.
    """
    if not fns:
        raise ValueError("interleaved_rates: fns must name at least one contender; got none")
    if not seconds > 0:
        raise ValueError(f"interleaved_rates: seconds must be positive; got {seconds!r}")
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"interleaved_rates: rounds must be an int >= 1; got {rounds!r}")
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    names = list(fns)
    rates: dict[str, dict[str, list[float]]] = {name: {clock: [] for clock in CLOCKS} for name in names}
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            for clock, rate in _round_rate(fns[name], seconds / rounds).items():
                rates[name][clock].append(rate)
    return rates


def _pair_stats(fw: dict[str, list[float]], hand: dict[str, list[float]]) -> dict[str, Any]:
    """Per clock: best-round rates, their ratio and the per-round ratios' median, min and max.

    The headline ``ratio`` is the median of the per-round CPU-time ratios.
    """
    out: dict[str, Any] = {}
    for clock in CLOCKS:
        per_round = [f / h for f, h in zip(fw[clock], hand[clock])]
        out[clock] = {"framework_calls_per_s": max(fw[clock]), "hand_calls_per_s": max(hand[clock]),
                      "ratio": max(fw[clock]) / max(hand[clock]),
                      "ratio_median_of_rounds": statistics.median(per_round),
                      "ratio_min_of_rounds": min(per_round), "ratio_max_of_rounds": max(per_round)}
    out["ratio"] = out["cpu"]["ratio_median_of_rounds"]
    return out


def measure(backends: tuple[str, ...] = BACKENDS, batch_sizes: tuple[int, ...] = BATCH_SIZES,
            seconds: float = 3.0, rounds: int = 10, threads: int = 1, diagnose: bool = False) -> dict[str, Any]:
    """Framework and hand-written calls/s and their ratio for every backend and batch size, in one run.

    Args:
        backends: backends to measure ("tf", "torch").
        batch_sizes: batch sizes to measure.
        seconds: wall-clock time per contender per batch size (split into ``rounds``).
        rounds: interleaved rounds per batch size.
        threads: CPU threads per framework (see `configure_threads`); 1 by default, as the paper's
            single-threaded worker, and because on a shared machine more threads than free cores
            make PyTorch's thread pool stall.
        diagnose: also time the PyTorch layout variants (`diagnose_torch_layout`; needs "torch") and
            count the ops one call runs on every backend (`op_counts`).

    Returns:
        ``{"config", "environment", "rows": [{"backend", "batch", "ratio", "cpu": {...}, "wall": {...},
        "max_abs_diff"}], "diagnosis": {...} | None}``: per clock (`CLOCKS`) ``framework_calls_per_s``,
        ``hand_calls_per_s`` (best rounds), ``ratio`` (framework / hand of the best rounds) and the
        median, min and max of the per-round ratios; the row's ``ratio`` is the median of the
        per-round CPU-time ratios.

    Raises:
        ValueError: for an unknown backend or a batch size that is not a positive int.
        AssertionError: when a hand-written actor's Q-values differ from the framework's.
    """
    for backend in backends:
        if backend not in BACKENDS:
            raise ValueError(f"act_report.measure: backends must be among {BACKENDS}; got {backend!r}")
    for batch in batch_sizes:
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ValueError(f"act_report.measure: batch_sizes must be positive ints; got {batch!r}")
    if diagnose and "torch" not in backends:
        raise ValueError(f"act_report.measure: diagnose=True needs 'torch' in backends; got {backends}")
    thread_settings = configure_threads(threads)
    load_before = os.getloadavg()
    started = time.perf_counter()
    rows = []
    for backend in backends:
        executor = build(backend)
        for batch in batch_sizes:
            framework, hand, states = setup_pair(backend, batch, executor)
            diff = float(np.max(np.abs(executor.backend.to_numpy(framework(states)) - np.asarray(hand(states)))))
            rates = interleaved_rates({"framework": lambda: framework(states), "hand": lambda: hand(states)},
                                      seconds, rounds)
            rows.append({"backend": backend, "batch": batch, **_pair_stats(rates["framework"], rates["hand"]),
                         "max_abs_diff": diff})
    diagnosis = None
    if diagnose:
        diagnosis = diagnose_torch_layout(batch_sizes, seconds, rounds)
        diagnosis["op_counts"] = {backend: op_counts(backend) for backend in backends}
    return {
        "config": {"state_space": STATE_SPACE, "num_actions": NUM_ACTIONS, "backends": list(backends),
                   "batch_sizes": list(batch_sizes), "seconds": seconds, "rounds": rounds, "threads": thread_settings,
                   "target_ratio": TARGET_RATIO},
        "environment": environment(load_before, time.perf_counter() - started),
        "rows": rows, "diagnosis": diagnosis,
    }


def conv_layout_actor(weights: dict[str, np.ndarray], fuse_bias: bool, contiguous_kernel: bool) -> Callable:
    """A hand-written PyTorch actor in `Conv2D`'s layout, optionally with one or both proposed changes.

    Every convolution gets its input permuted NHWC -> NCHW and its output permuted back,
    as `Conv2D`'s PyTorch body does; the kernel is stored ``(h, w, in, out)`` and
    permuted at every call. The dense head is the hand-written actor's.

    Args:
        weights: the framework's weights (``executor.get_weights()``).
        fuse_bias: pass the bias to ``conv2d`` instead of adding it to the permuted output.
        contiguous_kernel: make the permuted kernel contiguous (a copy) before ``conv2d``.

    Returns:
        ``act(states torch.float32[B,84,84,4]) -> torch.float32[B,6]``.
    """
    import torch
    import torch.nn.functional as fn

    t = torch.from_numpy
    convs = [(t(_weight(weights, f"{s}/kernel")), t(_weight(weights, f"{s}/bias")), stride) for s, stride in _CONVS]
    (dk, db), (vk, vb), (ak, ab) = [(t(_weight(weights, f"{s}/kernel")), t(_weight(weights, f"{s}/bias")))
                                    for s in ("dense_4", "value", "advantage")]

    @torch.no_grad()
    def act(states: Any) -> Any:
        x = states
        for kernel, bias, stride in convs:
            k = kernel.permute(3, 2, 0, 1)
            if contiguous_kernel:
                k = k.contiguous()
            if fuse_bias:
                x = torch.relu(fn.conv2d(x.permute(0, 3, 1, 2), k, bias, stride=stride).permute(0, 2, 3, 1))
            else:
                x = torch.relu(fn.conv2d(x.permute(0, 3, 1, 2), k, stride=stride).permute(0, 2, 3, 1) + bias)
        h = torch.relu(x.reshape(x.shape[0], -1) @ dk + db)
        v = h @ vk + vb
        a = h @ ak + ab
        return v + a - a.mean(dim=-1, keepdim=True)
    return act


def diagnose_torch_layout(batch_sizes: tuple[int, ...] = BATCH_SIZES, seconds: float = 3.0,
                          rounds: int = 10) -> dict[str, Any]:
    """Calls/s of the PyTorch framework actor and of the `DIAGNOSIS_VARIANTS`, interleaved per batch size.

    Every variant is checked against the framework's Q-values before timing.

    Returns:
        ``{"variants": {name: description}, "rows": [{"batch", "framework", <variant>: calls/s, ...,
        "ratios": {name: ratio}}]}``: best round's calls per CPU-second, and per contender the median
        over rounds of its rate over the hand-written actor's in the same round.

    Raises:
        AssertionError: when a variant's Q-values differ from the framework's.
    """
    executor = build("torch")
    weights = executor.get_weights()
    actors = {"hand-written": hand_written("torch", weights),
              "conv2d-layout": conv_layout_actor(weights, fuse_bias=False, contiguous_kernel=False),
              "+fused-bias": conv_layout_actor(weights, fuse_bias=True, contiguous_kernel=False),
              "+contiguous-kernel": conv_layout_actor(weights, fuse_bias=False, contiguous_kernel=True),
              "+both": conv_layout_actor(weights, fuse_bias=True, contiguous_kernel=True)}
    rows = []
    for batch in batch_sizes:
        framework, _, states = setup_pair("torch", batch, executor)
        expected = executor.backend.to_numpy(framework(states))
        for name, actor in actors.items():
            np.testing.assert_allclose(actor(states).numpy(), expected, rtol=1e-4, atol=1e-5,
                                       err_msg=f"diagnosis variant {name!r} at batch {batch}")
        fns = {"framework": lambda: framework(states)}
        fns.update({name: (lambda a=actor: a(states)) for name, actor in actors.items()})
        rates = interleaved_rates(fns, seconds, rounds)
        hand_rounds = rates["hand-written"]["cpu"]
        rows.append({"batch": batch, **{name: max(r["cpu"]) for name, r in rates.items()},
                     "ratios": {name: statistics.median(x / h for x, h in zip(r["cpu"], hand_rounds))
                                for name, r in rates.items()}})
    return {"variants": dict(DIAGNOSIS_VARIANTS), "rows": rows}


#: TensorFlow graph nodes that are not ops run per call in any meaningful sense.
_TF_IGNORED_NODES = ("Const", "Placeholder", "NoOp", "Identity")


def op_counts(backend: str, batch: int = 1) -> dict[str, dict[str, Any]]:
    """The ops one call runs, framework and hand-written: a count that machine load cannot blur.

    PyTorch: the top-level ATen ops one call dispatches (``torch.profiler``: ops called from
    Python, not the ones they call in turn). TensorFlow: the nodes of the traced function's
    graph, without ``Const``, ``Placeholder``, ``NoOp`` and ``Identity``.

    Returns:
        ``{"framework": {"total": n, "by_op": {op: n}}, "hand": {...}}``.

    Raises:
        ValueError: for an unknown backend.
    """
    if backend not in BACKENDS:
        raise ValueError(f"act_report.op_counts: backend must be one of {BACKENDS}; got {backend!r}")
    framework, hand, states = setup_pair(backend, batch)
    out: dict[str, dict[str, Any]] = {}
    for name, fn in (("framework", framework), ("hand", hand)):
        if backend == "torch":
            import torch

            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                fn(states)
            ops = [e.name for e in prof.events() if e.cpu_parent is None]
        else:
            graph = fn.get_concrete_function().graph.as_graph_def()
            ops = [node.op for node in graph.node if node.op not in _TF_IGNORED_NODES]
        by_op: dict[str, int] = {}
        for op in ops:
            by_op[op] = by_op.get(op, 0) + 1
        out[name] = {"total": len(ops), "by_op": dict(sorted(by_op.items(), key=lambda kv: (-kv[1], kv[0])))}
    return out


def git_revision() -> str:
    """The checkout's commit (with ``+dirty`` when tracked files differ from it), or 'unknown'."""
    root = Path(__file__).resolve().parents[2]
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                             check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, check=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return rev + ("+dirty" if dirty else "")


def environment(load_before: tuple[float, float, float], seconds: float) -> dict[str, Any]:
    """Machine, versions, date, revision and the load averages around a measurement of ``seconds``."""
    out: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "git_revision": git_revision(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores, {platform.system()} {platform.release()}",
        "processor": _cpu_model(),
        "python": platform.python_version(), "numpy": np.__version__,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "measurement_seconds": round(seconds, 1),
    }
    for module, key in (("tensorflow", "tensorflow"), ("torch", "torch")):
        try:
            out[key] = __import__(module).__version__
        except ImportError:
            out[key] = None
    return out


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def table(result: dict[str, Any]) -> str:
    """The Markdown table of ``result["rows"]``: one row per backend and batch size.

    Rates are the best round's calls per CPU-second; the headline ratio is the median of the
    per-round CPU ratios, with their range, the best rounds' ratio and the wall-clock median beside it.
    """
    lines = ["| backend | batch | framework calls/CPU-s | hand-written calls/CPU-s | framework / hand: median "
             "of rounds (CPU) | range over rounds | ratio of best rounds (CPU) | median of rounds (wall clock) "
             "| max abs diff |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in result["rows"]:
        cpu, wall = row["cpu"], row["wall"]
        flag = "" if row["ratio"] >= result["config"]["target_ratio"] else " (below target)"
        lines.append(f"| {row['backend']} | {row['batch']} | {cpu['framework_calls_per_s']:.1f} | "
                     f"{cpu['hand_calls_per_s']:.1f} | **{row['ratio']:.3f}**{flag} | "
                     f"{cpu['ratio_min_of_rounds']:.3f}-{cpu['ratio_max_of_rounds']:.3f} | {cpu['ratio']:.3f} | "
                     f"{wall['ratio_median_of_rounds']:.3f} | {row['max_abs_diff']:.1e} |")
    return "\n".join(lines)


def diagnosis_table(diagnosis: dict[str, Any]) -> str:
    """The Markdown table of the PyTorch layout diagnosis: calls per CPU-second, and the ratio to the hand-written."""
    names = ["framework"] + list(diagnosis["variants"])
    lines = ["| batch | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for row in diagnosis["rows"]:
        lines.append(f"| {row['batch']} | " + " | ".join(f"{row[n]:.1f} ({row['ratios'][n]:.3f})" for n in names)
                     + " |")
    return "\n".join(lines)


def op_count_table(counts: dict[str, dict[str, Any]]) -> str:
    """Markdown: per backend, the ops per call of the framework and the hand-written actor, and the difference."""
    lines = ["| backend | framework ops | hand-written ops | framework ops by type | extra ops in the framework |",
             "|---|---|---|---|---|"]
    for backend, c in counts.items():
        fw, hand = c["framework"], c["hand"]
        extra = {op: n - hand["by_op"].get(op, 0) for op, n in fw["by_op"].items() if n > hand["by_op"].get(op, 0)}
        lines.append(f"| {backend} | {fw['total']} | {hand['total']} | "
                     + ", ".join(f"{op} {n}" for op, n in fw["by_op"].items()) + " | "
                     + (", ".join(f"{op} +{n}" for op, n in extra.items()) or "none") + " |")
    return "\n".join(lines)


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
