"""Multi-device updates (RLgraph Fig. 8): synchronous updates/s and samples/s against replicas for towers (one
process, towers run concurrently) and processes (one replica per process, gradients all-reduced) side by side, on
the Nature CNN for the DQN and the IMPALA learner, per-replica batch fixed, one thread per replica
(`spacegraph.reports.multi_device`, each group in a fresh interpreter); and Ape-X CartPole's return against
training time with the learner on 1 and 2 replica processes (`spacegraph.reports.multi_device_apex`).

Runs measured before processes mode (no ``format`` in the result) are drawn as they were
(`spacegraph.reports.multi_device_legacy`).
"""

from __future__ import annotations

import statistics
from typing import Any

from harness.measure.figures import Figure, Panel, Ratio, Series, Table
from spacegraph.report.registry import Context, Scenario, register
from spacegraph.reports import multi_device_legacy

#: The issue's goal: 2 replica processes (one thread each, per-replica batch fixed) over 1, samples/s, Nature CNN.
TARGET = 1.7
TITLE = "Synchronous replicas: samples/s against replicas, towers and processes"
APEX_TITLE = "Ape-X CartPole with the learner on 1 and 2 replica processes: time to target"
APEX_PANEL = "Ape-X CartPole: evaluation return against training time"
UPDATES_NOTE = ("updates/s counts synchronous updates; with N replicas each update learns from N x the per-replica "
                "batch (DQN: N x {batch} rows; IMPALA: N x {rollouts} rollouts of 5 steps), so samples/s = updates/s "
                "x N x the per-replica batch. `single` is the plain graph (no strategy) on one batch; `towers N` "
                "the graph SyncReplicas expanded in this process, its towers run concurrently (PyTorch: a thread "
                "per tower; TF: its inter-op pool); `processes N` replica 0 in this process and N - 1 replica "
                "processes, gradients all-reduced (gloo on 127.0.0.1).")


def _label(result: dict[str, Any]) -> str:
    threads = result.get("threads", {}).get("tf")
    return f"{result['backend']} (TF inter-op {threads['inter_op']})" if threads and threads["inter_op"] > 1 \
        else result["backend"]


def throughput_figure(result: dict[str, Any]) -> Figure:
    """Samples/s against replicas per group, the table, and each setting's samples/s over its group's single."""
    panels: dict[str, Panel] = {}
    series, ratios, cells = [], [], []
    for part in result["throughput"]:
        label = _label(part)
        for loss in dict.fromkeys(r["loss"] for r in part["rows"]):
            own = [r for r in part["rows"] if r["loss"] == loss]
            single = next(r for r in own if r["mode"] == "single")
            title = f"{loss} ({part['network']}): samples/s against replicas"
            panel = panels.setdefault(title, Panel(title=title, x_label="replicas (1: the plain graph for processes)",
                                                   y_label="samples/s"))
            for mode in ("towers", "processes"):
                pts = ([single] if mode == "processes" else []) + [r for r in own if r["mode"] == mode]
                if len(pts) > (mode == "processes"):
                    series.append(Series(f"{label} {mode}", [r["replicas"] for r in pts],
                                         [r["samples_per_s"] for r in pts], panel=panel.title))
            for r in own:
                vs = r["samples_per_s"] / single["samples_per_s"]
                cells.append([label, loss, r["setting"], r["rows_per_update"], r["updates_per_s"], r["samples_per_s"],
                              f"{min(r['rounds']):.2f}-{max(r['rounds']):.2f}", vs])
                if r["mode"] != "single" and r["replicas"] >= 2:
                    goal = r["mode"] == "processes" and r["replicas"] == 2 and loss == "dqn" \
                        and part["network"] == "nature"
                    ratios.append(Ratio(f"{label} {loss}: {r['setting']} / 1 replica (samples/s, per-replica batch "
                                        f"fixed)", vs, ours=f"{r['samples_per_s']:,.0f} samples/s",
                                        peer=f"{single['samples_per_s']:,.0f} samples/s",
                                        target=f">= {TARGET:g}" if goal else None))
    first = result["throughput"][0]
    table = Table(title=f"Median of {first['repeats']} interleaved rounds of at least {first['seconds']:g} s per "
                        "group (one fresh process per group)",
                  header=["group", "loss", "setting", "rows per update", "updates/s", "samples/s",
                          "rounds (updates/s)", "samples/s vs single"], rows=cells)
    machine = first["machine"]
    notes = [UPDATES_NOTE.format(batch=first["batch"], rollouts=first["rollouts"]),
             "One framework thread per replica: each group's process runs one intra-op thread (TensorFlow: one "
             "inter-op thread too, except the towers group, whose towers run concurrently on its inter-op pool); "
             "each replica process runs one thread, pinned to its own core when the machine has one per replica. "
             f"This machine: {machine['cpus']} CPUs, {', '.join(machine.get('cuda') or []) or 'no GPU'}; 1-min load "
             f"{machine['load_average'][0]:.1f} at the start of the first group.",
             "On 2 cores, 4 replicas share the cores (two per core): their rows show the cost of oversubscription, "
             "not more parallelism."]
    goal = [r for r in ratios if r.target]
    headline = (f"{goal[0].name}: {goal[0].value:.2f} (target >= {TARGET:g})" if goal else
                (f"{ratios[0].name}: {ratios[0].value:.2f}" if ratios else "no replica rows"))
    return Figure(name="multi_device", title=TITLE, figure_ref="RLgraph Fig. 8", panels=list(panels.values()),
                  series=series, ratios=ratios, tables=[table], notes=notes, raw=result, headline=headline)


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def apex_figure(result: dict[str, Any]) -> Figure:
    """Return against training time per run, the time-to-target table, and 1-replica over 2-replica time."""
    apex = result["apex"]
    panel = Panel(title=APEX_PANEL, x_label="training seconds (evaluation excluded)", y_label="evaluation return")
    series, cells, times = [], [], {}
    for run in apex["runs"]:
        n = run["replicas"]
        pts = [(h["train_s"], h["eval_return"]) for h in run["history"] if h["eval_return"] is not None]
        series.append(Series(f"{n} replica{'s' if n > 1 else ''}, seed {run['seed']}", [p[0] for p in pts],
                             [p[1] for p in pts], panel=APEX_PANEL))
        if run["time_to_target_s"] is not None:
            times.setdefault(n, []).append(run["time_to_target_s"])
        last = run["history"][-1] if run["history"] else {}
        cells.append([n, run["seed"], run["batch_size"], run["time_to_target_s"] or
                      f"not reached in {apex['max_seconds']:g} s", run["steps_to_target"] or "-",
                      last.get("updates", "-"), run["stop_reason"]])
    one, two = _median(times.get(1, [])), _median(times.get(2, []))
    ratios = [Ratio("Ape-X CartPole time to target: 1 replica / 2 replica processes", one / two if one and two
                    else None, ours=f"{two:.1f} s" if two else "not reached",
                    peer=f"{one:.1f} s" if one else "not reached", target="> 1",
                    note="medians over the seeds that reached the target")]
    table = Table(title=f"Time to a full evaluation mean of {apex['target_return']:g} ({apex['eval_episodes']} "
                        f"episodes, after a {apex['screen_episodes']}-episode screen every {apex['eval_every']} env "
                        f"steps), at most {apex['max_seconds']:g} s of training per run",
                  header=["replicas", "seed", "learner batch", "time to target (s)", "env steps to target",
                          "updates at the end", "stopped by"], rows=cells)
    notes = [f"apex_cartpole ({apex['backend']}), the workers and the learner in one process (the in-process actor "
             f"executor, one framework thread), the learner's batch {apex['batch']} per replica; with 2 replicas "
             "its update runs on this process and one replica process (processes mode). Seeds "
             f"{', '.join(str(s) for s in apex['seeds'])}, interleaved. 1-min load {apex['load_average'][0]:.1f} at "
             "the start."]
    headline = f"{ratios[0].name}: {ratios[0].value:.2f}" if ratios[0].value is not None else \
        f"{ratios[0].name}: undetermined (1 replica: {ratios[0].peer}; 2: {ratios[0].ours})"
    return Figure(name="multi_device_apex", title=APEX_TITLE, figure_ref="RLgraph Fig. 8", panels=[panel],
                  series=series, ratios=ratios, tables=[table], notes=notes, raw=result, headline=headline)


def figures(result: dict[str, Any]) -> list[Figure]:
    """The figures of a measured result (a run before processes mode: its one figure as it was drawn)."""
    if "format" not in result:
        return multi_device_legacy.figures(result)
    return [throughput_figure(result)] + ([apex_figure(result)] if result.get("apex") else [])


#: The throughput groups: (backend, modes, TF inter-op threads), each measured in a fresh interpreter.
GROUPS = (("torch", ("towers", "processes"), 1), ("tf", ("processes",), 1), ("tf", ("towers",), 2))


def measure(quick: bool, seeds: int, progress: Any = None, apex: bool = True) -> dict[str, Any]:
    """The scenario's result: every group of `GROUPS`, then Ape-X's runs (``seeds`` seeds)."""
    from spacegraph.reports.multi_device import FORMAT, result_isolated
    from spacegraph.reports.multi_device_apex import measure as measure_apex

    parts = []
    for backend, modes, inter_op in GROUPS:
        replicas = [1, 2] if quick or backend == "tf" else [1, 2, 4]
        if progress is not None:
            progress.step(f"{backend} {'/'.join(modes)}: dqn and impala, Nature CNN, replicas {replicas}")
        parts.append(result_isolated(backend=backend, modes=list(modes), replicas=replicas, tf_inter_op=inter_op,
                                     seconds=0.5 if quick else 1.0, repeats=2 if quick else 3))
    out: dict[str, Any] = {"format": FORMAT, "throughput": parts, "apex": None}
    if apex:
        out["apex"] = measure_apex(list(range(seeds)), max_seconds=30.0 if quick else 60.0,
                                   target_return=100.0 if quick else 200.0, progress=progress)
    return out


def run(ctx: Context) -> list[Figure]:
    return figures(measure(ctx.quick, ctx.seeds, ctx.progress))


SCENARIO = register(Scenario(name="multi_device", title="Multi-device update rates", figure_ref="RLgraph Fig. 8",
                             run=run, steps=lambda ctx: len(GROUPS) + 2 * ctx.seeds, render=figures))
