"""Central batched inference (SEED RL style) against IMPALA's actor-learner mode as the network grows (issue 21):
env frames/s of both modes, their ratio and the central mode's achieved inference batch, for seven networks
from a 4.7k MLP to the Nature CNN with an LSTM, at 2-16 actors (`spacegraph.reports.central_inference`, every
point in a fresh process). The full run measures actors as threads and, for three networks, as processes.
"""

from __future__ import annotations

from typing import Any

from harness.measure.figures import Figure, Panel, Ratio, Series, Table
from spacegraph.report.registry import Context, Scenario, register

NO_GPU = ("No GPU on this machine: the learner (and the central mode's policy) runs on the CPU; GPU runs of this "
          "figure are in reports/gpu/.")


def figure(result: dict[str, Any]) -> Figure:
    """One run (one transport): the ratio and batch against actors per network, the table, a ratio per point."""
    processes = result["transport"] == "tf-dist"
    ratio_panel = Panel(title="central / actor-learner frames/s", x_label="actors", y_label="ratio", x_log=True)
    batch_panel = Panel(title="central inference batch (envs)", x_label="actors", y_label="envs per call",
                        x_log=True)
    series, ratios, rows = [], [], []
    for network, points in result["points"].items():
        xs, rs, bs = [], [], []
        for n in result["actors"]:
            al, ce = points.get(f"actor-learner-{n}", {}), points.get(f"central-{n}", {})
            value = ce["frames_per_s"] / al["frames_per_s"] if al.get("frames_per_s") and "frames_per_s" in ce \
                else None
            xs.append(n)
            rs.append(value)
            bs.append(ce.get("mean_batch_envs"))
            if value is not None:
                ratios.append(Ratio(f"{network}, {n} actors ({'processes' if processes else 'threads'}): central / "
                                    "actor-learner", value, ours=f"{ce['frames_per_s']:,.0f} frames/s",
                                    peer=f"{al['frames_per_s']:,.0f} frames/s"))
            rows.append([network, ce.get("params", al.get("params")), n,
                         *(r["frames_per_s"] if "frames_per_s" in r else f"({r.get('error', 'not run')})"
                           for r in (al, ce)), value, ce.get("mean_batch_envs"),
                         " / ".join(f"{r['updates_per_s']:.2f}" if "updates_per_s" in r else "-" for r in (al, ce))])
        series += [Series(network, xs, rs, panel=ratio_panel.title), Series(network, xs, bs, panel=batch_panel.title)]
    load = (f" 1-minute load average {result['load_average_start']:.1f} at the start and "
            f"{result['load_average_end']:.1f} at the end." if "load_average_end" in result else "")
    how = "actor processes, TF servers on 127.0.0.1" if processes else "actors as threads of the learner process"
    notes = [f"Transport `{result['transport']}` ({how}), "
             f"learner on `{result['device'] or 'cpu'}`, the actor-learner mode's policies on the CPU; "
             f"{result['seconds']:.0f} s windows after every actor delivered; PyTorch backend. Frames/s: env frames of "
             "the rollouts the learner learned from. Batch: the central mode's achieved inference batch in "
             "environments." + load, *result.get("notes", [])]
    if not result.get("device"):
        notes.insert(0, NO_GPU)
    best = max(ratios, key=lambda r: r.value or 0.0, default=None)
    worst = min(ratios, key=lambda r: r.value or 0.0, default=None)
    headline = (f"central / actor-learner frames/s ({result['device_label']}): from {worst.value:.2f}x "
                f"({worst.name.split(' (')[0]}) to {best.value:.2f}x ({best.name.split(' (')[0]})"
                if best and worst else "no point measured in both modes")
    name = "central_inference_processes" if processes else "central_inference"
    return Figure(name=name, title=f"Central inference against actor-learner IMPALA, actors as "
                                   f"{'processes' if processes else 'threads'} ({result['device_label']})",
                  figure_ref="issue 21 (SEED RL style)", panels=[ratio_panel, batch_panel], series=series,
                  ratios=ratios, tables=[Table(title="Both modes per network and actor count",
                                               header=["network", "params", "actors", "actor-learner frames/s",
                                                       "central frames/s", "central / actor-learner",
                                                       "central batch (envs)",
                                                       "learner updates/s (actor-learner / central)"], rows=rows)],
                  notes=notes, raw=result, headline=headline)


def figures(result: dict[str, Any]) -> list[Figure]:
    """A figure per run: ``result`` is one run of `measure_all` or ``{"runs": [run, ...]}``."""
    return [figure(run) for run in result.get("runs", [result])]


def gpu() -> str | None:
    """``cuda:0`` where PyTorch sees a GPU, else None."""
    try:
        import torch
    except ImportError:
        return None
    return "cuda:0" if torch.cuda.is_available() else None


def run(ctx: Context) -> list[Figure]:
    from spacegraph.reports.central_inference import NETWORKS, measure_all

    device = gpu()
    if ctx.quick:
        return figures(measure_all(["mlp", "nature"], [2, 4], device=device, seconds=3.0, log=ctx.progress.step))
    return figures({"runs": [measure_all(list(NETWORKS), [2, 4, 8, 16], device=device, log=ctx.progress.step),
                             measure_all(["mlp", "resnet", "nature"], [2, 4, 8, 16], transport="tf-dist",
                                         device=device, log=ctx.progress.step)]})


def steps(ctx: Context) -> int:
    return 2 * 2 * 2 if ctx.quick else 2 * 4 * (7 + 3)


SCENARIO = register(Scenario(name="central_inference", title="Central inference", figure_ref="issue 21", run=run,
                             steps=steps, render=figures))
