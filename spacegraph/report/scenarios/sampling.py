"""Single-worker env frames/s against envs per worker (RLgraph Fig. 7a) on ALE Pong: raw env stepping, our
`VectorEnvWorker` with the DQN agent acting (both backends) and RLlib's DQN env runner, timed in interleaved
rounds in one run (`spacegraph.reports.sampling_measure`).
"""

from __future__ import annotations

from typing import Any

from harness.measure.figures import Figure, Panel, Ratio, Series, Table
from spacegraph.report.registry import Context, Scenario, register

TITLES = {"raw_ale": "raw ALE", "raw_env": "raw env (agent's wrappers)", "ours_tf": "ours, TF",
          "ours_torch": "ours, PyTorch", "rllib": "RLlib DQN env runner"}
SIDES = {"raw_ale": "reference", "raw_env": "reference", "ours_tf": "ours", "ours_torch": "ours", "rllib": "peer"}


def figures(result: dict[str, Any]) -> list[Figure]:
    """Frames per CPU-second against N per contender, and ours / RLlib, ours / raw env per N."""
    rows = result["rows"]
    contenders = [c for c in TITLES if c in rows[0]]
    panel = Panel(title="env frames per CPU-second", x_label="environments per worker", y_label="frames/CPU-s",
                  x_log=True, y_log=True)
    xs = [r["num_envs"] for r in rows]
    series = [Series(TITLES[c], xs, [r[c]["frames_per_cpu_s"] for r in rows], side=SIDES[c], panel=panel.title)
              for c in contenders]
    ratios = []
    for r in rows:
        for key, value in r["ratios"].items():
            ours, peer = key.split("/")
            if value is None:
                continue
            ratios.append(Ratio(f"sampling N={r['num_envs']}: {TITLES[ours]} / {TITLES[peer]}", value,
                                ours=f"{r[ours]['frames_per_cpu_s']:,.0f} frames/CPU-s",
                                peer=f"{r[peer]['frames_per_cpu_s']:,.0f} frames/CPU-s",
                                target="> 1.0" if peer == "rllib" else None,
                                note="the limit is 1" if peer == "raw_env" else ""))
    table = Table(title="Frames per CPU-second (best round) / per wall-clock second (best round)",
                  header=["N", *(TITLES[c] for c in contenders)],
                  rows=[[r["num_envs"], *(f"{r[c]['frames_per_cpu_s']:,.0f} / {r[c]['frames_per_s']:,.0f}"
                                          for c in contenders)] for r in rows])
    counts = Table(title="Env steps / frames each contender took in all (chunk steps)",
                   header=["N", *(TITLES[c] for c in contenders)],
                   rows=[[r["num_envs"], *(f"{r[c]['steps']} / {r[c]['frames']} ({r[c]['chunk_steps']})"
                                           for c in contenders)] for r in rows])
    ours = [c for c in contenders if c.startswith("ours_") and "breakdown" in rows[0][c]]
    tables = [table, counts]
    if ours:
        tables.append(Table(title="Where our worker's time went: act / observe+insert / env+worker",
                            header=["N", *(TITLES[c] for c in ours)],
                            rows=[[r["num_envs"], *(f"{r[c]['breakdown']['act_share']:.0%} / "
                                                    f"{r[c]['breakdown']['observe_share']:.0%} / "
                                                    f"{r[c]['breakdown']['other_share']:.0%}" for c in ours)]
                                  for r in rows]))
    cfg = result["config"]
    notes = [f"Environment {cfg['env'].get('id', cfg['env'])}; frames count the frame skip. {cfg['rounds']} "
             f"interleaved rounds of {cfg['seconds']} s per contender per N (chunks of about "
             f"{cfg['chunk_seconds']} s).", f"RLlib: {result['rllib_note'] or 'measured in the same rounds'}."]
    return [Figure(name="sampling", title="Single-worker env frames/s against envs per worker",
                   figure_ref="RLgraph Fig. 7a", panels=[panel], series=series, ratios=ratios, tables=tables,
                   notes=notes, peer_missing=result["rllib_note"], raw=result, headline=headline(result))]


def headline(result: dict[str, Any]) -> str:
    """Ours / raw env (and ours / RLlib where measured) at the largest N, per backend."""
    last = result["rows"][-1]
    parts = [f"{TITLES[k.split('/')[0]]} / {TITLES[k.split('/')[1]]} {v:.2f}" for k, v in last["ratios"].items()
             if v is not None]
    env = result["config"]["env"]
    return f"{env.get('id', env) if isinstance(env, dict) else env}, N={last['num_envs']}: " + "; ".join(parts)


def run(ctx: Context) -> list[Figure]:
    from spacegraph.reports.sampling_measure import measure

    ctx.progress.step("Pong: raw env, ours (TF, PyTorch), RLlib")
    result = measure(num_envs=(1, 4) if ctx.quick else (1, 2, 4, 8), seconds=2.0 if ctx.quick else 5.0,
                     rounds=2 if ctx.quick else 3, warmup_seconds=0.5 if ctx.quick else 1.0, rllib=ctx.peers)
    if not ctx.peers:
        result["rllib_note"] = "peers not requested (--no-peers)"
    return figures(result)


SCENARIO = register(Scenario(name="sampling", title="Single-worker sampling", figure_ref="RLgraph Fig. 7a", run=run,
                             steps=lambda ctx: 1,
                             render=figures))
