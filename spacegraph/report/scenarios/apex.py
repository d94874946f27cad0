"""Ape-X throughput on Ray (RLgraph Fig. 6 on one machine): env frames/s against workers on CartPole and Pong,
learning off and on, beside RLlib's DQN at the same number of env runners and raw stepping of the same
environment vectors, and a scaling model projecting 16-256 workers from the measured costs
(`spacegraph.reports.apex_throughput`; every point a fresh process with a local Ray instance).
"""

from __future__ import annotations

from typing import Any

from harness.measure.figures import Figure, Panel, Ratio, Series, Table
from spacegraph.report.registry import Context, Scenario, register
from spacegraph.reports.apex_throughput import OURS, SIDE_NAMES, TARGET_VS_RLLIB, verdicts

ENVS = ("cartpole", "pong")
PROJECTION = "Pong: projection and published (other hardware)"
METHOD = ("Ours: `ApexDriver` with N `ApexWorker` actors (one DQN graph each, worker-side n-step and priorities), "
          "min(N, 2) `ReplayShard` actors and the learner on the driver, free-running; and the same with the learner "
          "throttled to RLlib's DQN replay ratio (one update per n_step x envs x N env steps). RLlib: `DQNConfig` "
          "(new API stack, PyTorch) with N env runners and the same environments, envs per runner, network sizes, "
          "n-step, batch size, replay capacity and learning start. Learning off: ours never updates, RLlib never "
          "reaches its learning start. Raw: N processes stepping one worker's environment vector with random "
          "actions. Frames include Atari's frame skip; CPU is the CPU time of every process of the run over wall "
          "time times all cores.")


def _label(p: dict[str, Any]) -> str:
    return SIDE_NAMES[p["side"]] + ("" if p["side"] == "raw" else (", learning" if p["learning"] else ", no learning"))


def _points_table(points: list[dict[str, Any]], env: str, seconds: float) -> Table:
    rows = []
    for p in sorted((p for p in points if p["env"] == env),
                    key=lambda p: (p["workers"], bool(p["learning"]), list(SIDE_NAMES).index(p["side"]))):
        learning = "-" if p["side"] == "raw" else ("on" if p["learning"] else "off")
        if "skipped" in p:
            rows.append([p["workers"], learning, SIDE_NAMES[p["side"]], f"skipped: {p['skipped'][:80]}", None, None,
                         None, None])
            continue
        rows.append([p["workers"], learning, SIDE_NAMES[p["side"]], p["frames_per_s"], p.get("updates_per_s"),
                     p.get("replay_ratio") if p["learning"] else None, f"{100 * p['cpu_utilisation']:.0f}%",
                     p["seconds"]])
    return Table(title=f"{env}: each point a fresh process, {seconds:g} s measured after warm-up",
                 header=["workers", "learning", "side", "frames/s", "updates/s", "replay ratio", "CPU", "seconds"],
                 rows=rows)


def _scaling(model: dict[str, Any] | None) -> tuple[list[Table], list[str]]:
    if not model:
        return [], []
    c = model["costs_ms"]
    note = (f"Scaling model ({model['env']}, from the {model['from_workers']}-worker points): worker "
            f"{c['worker_per_step']:.3f} ms per env step; shard {c['shard_per_add']:.3f} ms per transition added and "
            f"{c['shard_per_sampled_record']:.4f} ms per record sampled; driver {c['driver_per_step']:.3f} ms per env "
            f"step routed and {c['driver_per_update']:.2f} ms per learner update (batch {model['batch_size']}, "
            f"{model['updates_per_s']:.1f} updates/s measured). It assumes a core per worker, {model['shards']} "
            "shards on a core each, the driver on one core with the learner at its measured rate on this CPU (the "
            "paper's learner had a V100), no network cost and costs constant in N.")
    table = Table(title=f"Projected frames/s ({model['env']})",
                  header=["workers", "projected frames/s", "bound by", "workers limit", "shards limit", "driver limit"],
                  rows=[[r["workers"], r["frames_per_s"], r["bound"], r["workers_limit"], r["shards_limit"],
                         r["driver_limit"]] for r in model["rows"]])
    return [table], [note]


def headline(result: dict[str, Any]) -> str:
    """The target's verdict on Pong (ours / RLlib, learning on), else our Pong rate at the most workers."""
    on = [r for r in result["ratios"] if r["env"] == "pong" and r["learning"] and r["vs_rllib"] is not None]
    if on:
        low = min(r["vs_rllib"] for r in on)
        verdict = "met" if low >= TARGET_VS_RLLIB else "missed"
        return (f"Pong, learning on, ours / RLlib DQN frames/s at equal workers: lowest {low:.2f}x over "
                f"{sorted({r['workers'] for r in on})} workers (target >= {TARGET_VS_RLLIB:g}x: {verdict})")
    ours = [p for p in result["points"] if p["side"] == "apex" and p["learning"] and "frames_per_s" in p]
    if not ours:
        return "no Ape-X point measured"
    best = max(ours, key=lambda p: (p["env"] == "pong", p["workers"]))
    return f"Ape-X on {best['env']}, {best['workers']} workers, learning on: {best['frames_per_s']:,.0f} frames/s"


def figures(result: dict[str, Any]) -> list[Figure]:
    """Frames/s against workers per env, the projection beside the published figures, points, ratios, model."""
    points = result["points"]
    envs = [e for e in ENVS if any(p["env"] == e for p in points)]
    panels = [Panel(title=f"{env}: env frames/s (this machine)", x_label="workers / env runners",
                    y_label="env frames/s", x_log=True, y_log=True) for env in envs]
    panels += [Panel(title=PROJECTION, x_label="workers", y_label="env frames/s", x_log=True, y_log=True),
               Panel(title="RLgraph / RLlib, published", x_label="workers", y_label="ratio", x_log=True)]
    series = []
    for env, panel in zip(envs, panels):
        for side in SIDE_NAMES:
            for learning in ((False,) if side == "raw" else (False, True)):
                ps = sorted((p for p in points if p["env"] == env and p["side"] == side
                             and bool(p["learning"]) == learning and "skipped" not in p), key=lambda p: p["workers"])
                if ps:
                    series.append(Series(_label(ps[0]), [p["workers"] for p in ps], [p["frames_per_s"] for p in ps],
                                         side={"raw": "reference", "rllib": "peer"}.get(side, "ours"),
                                         panel=panel.title))
    model = (result.get("scaling") or {}).get("pong")
    if model:
        series.append(Series("ours, projected (model)", [r["workers"] for r in model["rows"]],
                             [r["frames_per_s"] for r in model["rows"]], panel=PROJECTION))
    ratios = []
    for r in result["ratios"]:
        where = f"Ape-X {r['env']} {r['workers']} workers, learning {'on' if r['learning'] else 'off'}"
        if r["vs_rllib"] is not None:
            ratios.append(Ratio(f"{where}: {SIDE_NAMES[r['side']]} / RLlib DQN", r["vs_rllib"],
                                target=f">= {TARGET_VS_RLLIB:g}" if r["learning"] else None))
        if r["of_raw"] is not None and r["side"] == OURS[0]:
            ratios.append(Ratio(f"{where}: ours / raw stepping", r["of_raw"], note="the limit is 1"))
    tables = [_points_table(points, env, result["seconds_per_point"]) for env in envs]
    model_tables, model_notes = _scaling(model)
    rllib = [p for p in points if p["side"] == "rllib"]
    missing = next((p["skipped"] for p in rllib if "skipped" in p), None)  # not run at all: the runner says why
    notes = [METHOD, *(v for env in envs for v in verdicts(result["ratios"], env)), *model_notes,
             *result.get("notes", [])]
    return [Figure(name="apex", title="Ape-X throughput on Ray beside RLlib's DQN and raw stepping",
                   figure_ref="RLgraph Fig. 6 (one machine)", panels=panels, series=series, ratios=ratios,
                   tables=tables + model_tables, notes=notes, peer_missing=missing, raw=result,
                   headline=headline(result))]


def run(ctx: Context) -> list[Figure]:
    from spacegraph.reports.apex_throughput import measure

    sides = [s for s in SIDE_NAMES if ctx.peers or s != "rllib"]
    result = measure(envs=("cartpole",) if ctx.quick else ENVS, workers=(1, 2) if ctx.quick else (1, 2, 4),
                     seconds=4.0 if ctx.quick else 15.0, sides=sides, log=_Log(ctx))
    return figures(result)


class _Log:
    """Progress lines of `run_all` as steps of the scenario's progress bar."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def write(self, line: str) -> None:
        if line.strip():
            self.ctx.progress.step(line.strip())

    def flush(self) -> None:
        pass


def steps(ctx: Context) -> int:
    envs, workers = (1, 2) if ctx.quick else (2, 3)
    return envs * workers * (len(SIDE_NAMES) * 2 - 2 - (0 if ctx.peers else 2))


SCENARIO = register(Scenario(name="apex", title="Ape-X throughput", figure_ref="RLgraph Fig. 6", run=run,
                             steps=steps, render=figures))
