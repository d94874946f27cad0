"""The Ape-X throughput report: ratios to RLlib and raw stepping, the scaling model, Markdown and plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.measure.files import pyplot
from harness.measure.tables import markdown_table

PROJECTED_WORKERS = (16, 32, 64, 128, 256)
#: The paper's setting for Fig. 6: 4 replay memories, 4 envs per worker, one CPU per worker.
MODEL_SHARDS = 4
TARGET_VS_RLLIB = 3.0


def _find(points: list[dict], side: str, env: str, workers: int, learning: bool) -> dict | None:
    return next((p for p in points if p["side"] == side and p["env"] == env and p["workers"] == workers
                 and bool(p["learning"]) == learning and "skipped" not in p), None)


OURS = ("apex", "apex_rr")
SIDE_NAMES = {"raw": "raw stepping", "apex": "ours (Ape-X on Ray)",
              "apex_rr": "ours, learner at RLlib's replay ratio", "rllib": "RLlib DQN"}


def ratios(points: list[dict]) -> list[dict[str, Any]]:
    """Ours / RLlib and ours / raw frames/s at each (side of ours, env, workers, learning)."""
    rows = []
    for p in points:
        if p["side"] not in OURS or "skipped" in p:
            continue
        rllib = _find(points, "rllib", p["env"], p["workers"], p["learning"])
        raw = _find(points, "raw", p["env"], p["workers"], False)
        rows.append({"side": p["side"], "env": p["env"], "workers": p["workers"], "learning": p["learning"],
                     "vs_rllib": p["frames_per_s"] / rllib["frames_per_s"] if rllib else None,
                     "of_raw": p["frames_per_s"] / raw["frames_per_s"] if raw else None})
    return rows


def verdicts(rows: list[dict[str, Any]], env: str) -> list[str]:
    """The target's verdict on ``env`` for each side of ours that has learning-on ratios."""
    out = []
    for side in OURS:
        on = [r["vs_rllib"] for r in rows if r["env"] == env and r.get("side", "apex") == side and r["learning"]
              and r["vs_rllib"] is not None]
        if on:
            verdict = "met" if min(on) >= TARGET_VS_RLLIB else "not met"
            out.append(f"Target (at least {TARGET_VS_RLLIB:g}x RLlib's frames/s at equal workers with learning on), "
                       f"{SIDE_NAMES[side]}: **{verdict}** on {env} (lowest ratio {min(on):.2f}x).")
    return out


def scaling_model(points: list[dict], env: str = "pong") -> dict[str, Any] | None:
    """Projected frames/s for `PROJECTED_WORKERS` from the costs measured at the most workers on ``env``.

    Costs (CPU-seconds): ``c_w`` per env step in a worker, ``c_add`` per transition a shard adds (learning
    off), ``c_sample`` per record a shard hands the learner, ``c_route`` per env step on the driver
    (learning off), ``c_update`` per learner update on the driver. With W workers on a core each, M shards
    on a core each and the driver on one core running a learner at its measured rate U::

        steps/s = min(W / c_w, (M - U B c_sample) / c_add, (1 - U c_update) / c_route)
    """
    measured = [p for p in points if p["side"] == "apex" and p["env"] == env and "skipped" not in p
                and "role_cpu_seconds" in p]
    if not measured:
        return None
    n = max(p["workers"] for p in measured)
    off, on = _find(measured, "apex", env, n, False), _find(measured, "apex", env, n, True)
    if off is None or on is None or not on.get("updates"):
        return None
    c_w = off["role_cpu_seconds"]["workers"] / off["steps"]
    c_add = off["role_cpu_seconds"]["shards"] / off["steps"]
    c_sample = max(0.0, on["role_cpu_seconds"]["shards"] - c_add * on["steps"]) / max(on.get("sampled", 0), 1)
    c_route = off["role_cpu_seconds"]["driver"] / off["steps"]
    c_update = max(0.0, on["role_cpu_seconds"]["driver"] - c_route * on["steps"]) / on["updates"]
    u, b, fps = on["updates_per_s"], on["batch_size"], on["frames_per_step"]
    rows = []
    for w in PROJECTED_WORKERS:
        limits = {"workers": w / c_w, "shards": max(MODEL_SHARDS - u * b * c_sample, 0.0) / c_add,
                  "driver": max(1.0 - u * c_update, 0.0) / c_route}
        bound = min(limits, key=limits.get)
        rows.append({"workers": w, "frames_per_s": fps * limits[bound], "bound": bound,
                     **{f"{k}_limit": fps * v for k, v in limits.items()}})
    return {"env": env, "from_workers": n, "costs_ms": {"worker_per_step": 1e3 * c_w, "shard_per_add": 1e3 * c_add,
                                                        "shard_per_sampled_record": 1e3 * c_sample,
                                                        "driver_per_step": 1e3 * c_route,
                                                        "driver_per_update": 1e3 * c_update},
            "updates_per_s": u, "batch_size": b, "shards": MODEL_SHARDS, "rows": rows}


def baselines() -> list[dict[str, Any]]:
    """The published Ape-X figures (RLgraph paper Fig. 6 text, RLlib), marked as other hardware."""
    try:
        from spacegraph.report.baselines import load

        return [{"label": b.label, "where": b.where, "hardware": b.hardware, "unit": b.unit,
                 "points": [dict(p) if isinstance(p, dict) else vars(p) for p in b.points]}
                for b in load().get("distributed", [])]
    except Exception as exc:  # noqa: BLE001 - the report stands without them
        return [{"label": f"(baselines not loaded: {exc})", "where": "", "hardware": "", "unit": "", "points": []}]


def _fmt(x: Any, digits: int = 0) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def _point_rows(points: list[dict], env: str) -> list[list[str]]:
    rows = []
    for p in sorted((p for p in points if p["env"] == env),
                    key=lambda p: (p["workers"], bool(p["learning"]), list(SIDE_NAMES).index(p["side"]))):
        side = SIDE_NAMES[p["side"]]
        if "skipped" in p:
            rows.append([p["workers"], "on" if p["learning"] else "off", side, f"skipped: {p['skipped'][:80]}",
                         "", "", "", "", ""])
            continue
        ratio = p.get("replay_ratio") if p["learning"] else None
        rows.append([p["workers"], "-" if p["side"] == "raw" else ("on" if p["learning"] else "off"), side,
                     _fmt(p["frames_per_s"]), _fmt(p.get("updates_per_s"), 1), _fmt(ratio, 2),
                     f"{100 * p['cpu_utilisation']:.0f}%", _fmt(p["seconds"], 1)])
    return rows


def markdown(result: dict[str, Any]) -> str:
    """The report's Markdown."""
    env = result["environment"]
    points = result["points"]
    lines = ["# Ape-X throughput on Ray, beside RLlib's DQN and raw stepping", "",
             f"Measured {env['date']} at `{env['git_revision']}` on {env['machine']} ({env['processor']}), "
             f"load average {env['load_average_before']} before and {env['load_average_after']} after "
             f"({env['measurement_seconds']:.0f} s in all). Each point: a fresh process, a local Ray instance on "
             f"127.0.0.1, warm-up past the start of learning, then {result['seconds_per_point']:.0f} s of wall "
             f"time counted; the sides of a point ran back to back. Frames include Atari's frame skip (4 on "
             f"Pong). CPU utilisation is the CPU time of every process of the run (the driver, the Ray "
             f"session's processes and their children) over wall time times all cores. The machine was shared "
             f"with other jobs, so absolute rates vary by tens of percent between points; the ratios are "
             f"between sides measured minutes apart.", "",
             "Ours: `ApexDriver` with N `ApexWorker` actors (one DQN graph each, worker-side n-step and "
             "priorities), min(N, 2) `ReplayShard` actors and the learner on the driver (update thread, "
             "prefetch queue), free-running; and the same with the learner throttled (`apex.throttle`) to "
             "one update per n_step x envs x N env steps, the replay ratio RLlib's DQN runs at by default "
             "(each `training_step` samples one rollout fragment of n_step steps per env, then makes one "
             "update). Replay ratio: records learned from per env step (updates x batch / steps; RLlib's from "
             "its learners' trained-records count). RLlib: `DQNConfig` (new API stack, PyTorch) with N env runners, "
             "the same environments, envs per runner, network sizes, n-step, batch size, replay capacity "
             "(prioritized episode replay) and learning start; its `algo.train()` loop samples and learns in "
             "turn. Learning off: ours never updates (workers still compute priorities, shards still insert); "
             "RLlib never reaches its learning start. Raw: N processes stepping one worker's environment "
             "vector with random actions.", ""]
    for env_name in ("cartpole", "pong"):
        rows = _point_rows(points, env_name)
        if not rows:
            continue
        lines += [f"## {env_name.capitalize()}", "",
                  markdown_table(["workers", "learning", "side", "frames/s", "updates/s", "replay ratio", "CPU",
                                  "seconds"], rows), ""]
        rs = [r for r in result["ratios"] if r["env"] == env_name]
        if rs:
            lines += ["Ours over RLlib and over raw stepping (same workers):", "",
                      markdown_table(["workers", "learning", "side", "ours / RLlib", "ours / raw"],
                                     [[r["workers"], "on" if r["learning"] else "off",
                                       SIDE_NAMES[r.get("side", "apex")], _fmt(r["vs_rllib"], 2),
                                       _fmt(r["of_raw"], 2)] for r in rs]), ""]
            lines += [v + "\n" for v in verdicts(rs, env_name)]
    for env_name, model in (result.get("scaling") or {}).items():
        if not model:
            continue
        c = model["costs_ms"]
        lines += [f"## Scaling model ({env_name}, from the {model['from_workers']}-worker points)", "",
                  f"Measured CPU costs: worker {c['worker_per_step']:.3f} ms per env step; shard "
                  f"{c['shard_per_add']:.3f} ms per transition added and {c['shard_per_sampled_record']:.4f} ms per "
                  f"record sampled; driver {c['driver_per_step']:.3f} ms per env step routed and "
                  f"{c['driver_per_update']:.2f} ms per learner update (batch {model['batch_size']}, "
                  f"{model['updates_per_s']:.1f} updates/s measured). Assumptions: one core per worker, "
                  f"{model['shards']} shards on a core each (the paper's setting), the driver (routing and learner "
                  f"thread, one Python process) on one core with the learner at its measured rate on this CPU "
                  f"(the paper's learner had a V100), no network or object-store cost, costs constant in N. "
                  f"Frames/s = frames per step x min(N / worker cost, shard cores left after sampling / add "
                  f"cost, driver core left after learning / routing cost).", "",
                  markdown_table(["workers", "projected frames/s", "bound by", "workers limit", "shards limit",
                                  "driver limit"],
                                 [[r["workers"], _fmt(r["frames_per_s"]), r["bound"], _fmt(r["workers_limit"]),
                                   _fmt(r["shards_limit"]), _fmt(r["driver_limit"])] for r in model["rows"]]), ""]
    bl = result.get("baselines") or []
    if bl:
        lines += ["## Published figures (other hardware)", "",
                  markdown_table(["source", "where", "hardware", "points", "unit"],
                                 [[b["label"], b["where"], b["hardware"], ", ".join(
                                     f"{p.get('x') if p.get('x') is not None else 'max'}: {p.get('y'):,}"
                                     for p in b["points"]), b["unit"]] for b in bl]), "",
                  "The paper's Fig. 6 ran 16-256 workers of one CPU each on 8-16 64-vCPU nodes with a V100 learner; "
                  "this machine has 2 cores for everything, so its rates are not comparable, only the model's "
                  "projection is set beside them.", ""]
    if result.get("notes"):
        lines += ["## Notes", ""] + [f"- {n}" for n in result["notes"]] + [""]
    lines += ["## Reproduce", "", "```bash", result.get("command", ""), "```", ""]
    return "\n".join(lines)


def plot(result: dict[str, Any], path: Path) -> None:
    """Frames/s against workers per env (learning off dashed, on solid), and the scaling projection."""
    plt = pyplot("apex_throughput.plot")
    if plt is None:
        return
    points = result["points"]
    envs = [e for e in ("cartpole", "pong") if any(p["env"] == e for p in points)]
    fig, axes = plt.subplots(1, len(envs) + 1, figsize=(5 * (len(envs) + 1), 4))
    colors = {"raw": "gray", "apex": "tab:blue", "apex_rr": "tab:green", "rllib": "tab:orange"}
    for ax, env in zip(axes, envs):
        for side in colors:
            for learning in ((False,) if side == "raw" else (False, True)):
                ps = sorted((p for p in points if p["env"] == env and p["side"] == side
                             and bool(p["learning"]) == learning and "skipped" not in p), key=lambda p: p["workers"])
                if ps:
                    ax.plot([p["workers"] for p in ps], [p["frames_per_s"] for p in ps], marker="o",
                            color=colors[side], linestyle="-" if learning or side == "raw" else "--",
                            label=f"{side}{'' if side == 'raw' else (', learning' if learning else ', no learning')}")
        ax.set_title(f"{env} (this machine)")
        ax.set_xlabel("workers / env runners")
        ax.set_ylabel("env frames/s")
        ax.set_yscale("log")
        ax.legend(fontsize=7)
    ax = axes[-1]
    model = (result.get("scaling") or {}).get("pong")
    if model:
        ax.plot([r["workers"] for r in model["rows"]], [r["frames_per_s"] for r in model["rows"]], marker="o",
                label="ours, projected (model)")
    for b in result.get("baselines") or []:
        if b["unit"] == "frames/s":
            for p in b["points"]:
                if p.get("x") is not None:
                    ax.scatter([p["x"]], [p["y"]], marker="x", label=f"{b['label']} (other hardware)")
                else:
                    ax.axhline(p["y"], linestyle=":", color="k", label=f"{b['label']} (other hardware)")
    ax.set_xscale("log", base=2)
    ax.set_title("Pong: projection vs published")
    ax.set_xlabel("workers")
    ax.set_ylabel("env frames/s")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
