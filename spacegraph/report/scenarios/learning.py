"""DQN learning curves on CartPole-v1 against env steps and wall-clock: ours (TF, PyTorch) and RLlib's tuned
DQN, each run in a fresh one-thread subprocess, interleaved by seed (`spacegraph.reports.learning_runs`);
the mean and a 95% interval over seeds at every evaluation.

Each run stops when solved or at its budget (env steps and seconds): the quick report's budget is small, the
full one (`Criterion`, `Budget` defaults: 150k env steps, 600 s) lets every side solve on a 2-core machine.
"""

from __future__ import annotations

from typing import Any

from harness.measure.figures import Figure, Panel, Ratio, Series, Table, mean_ci95
from spacegraph.report.registry import Context, Scenario, register
from spacegraph.reports.learning_criterion import SIDE_TITLES
from spacegraph.reports.learning_ratios import fmt_ratio

TITLES = {"ours_tf": "ours, TF", "ours_torch": "ours, PyTorch", "rllib": "RLlib DQN"}
SIDES = ("ours_tf", "ours_torch", "rllib")


def curve_points(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per evaluation index: mean env steps and train seconds, and mean / 95% interval of the greedy return
    over the runs that reached it (``n`` of them)."""
    runs = [r for r in runs if "error" not in r and r.get("curve")]
    out = []
    for k in range(max((len(r["curve"]) for r in runs), default=0)):
        pts = [r["curve"][k] for r in runs if len(r["curve"]) > k]
        mean, lo, hi = mean_ci95([p["screen_mean"] for p in pts])
        out.append({"env_steps": mean_ci95([p["env_steps"] for p in pts])[0],
                    "train_s": mean_ci95([p["train_s"] for p in pts])[0], "mean": mean, "lo": lo, "hi": hi,
                    "n": len(pts)})
    return out


def figures(result: dict[str, Any]) -> list[Figure]:
    """Return against env steps and against training seconds per side (mean, 95% band), runs, ratios."""
    from spacegraph.reports.learning_ratios import METRIC_TITLES, TARGETS

    steps = Panel(title="greedy return against env steps", x_label="env steps", y_label="mean return")
    wall = Panel(title="greedy return against training wall-clock", x_label="training seconds",
                 y_label="mean return")
    series = []
    for side in result["config"]["sides"]:
        pts = curve_points([r for r in result["runs"] if r["side"] == side])
        kind = "peer" if side == "rllib" else "ours"
        for panel, x in ((steps, "env_steps"), (wall, "train_s")):
            series.append(Series(TITLES[side], [p[x] for p in pts], [p["mean"] for p in pts],
                                 lo=[p["lo"] for p in pts], hi=[p["hi"] for p in pts], side=kind, panel=panel.title))
    ratios = []
    for side, metrics in result["comparison"].items():
        for metric, entry in metrics.items():
            r = entry["all"]
            op, limit = TARGETS[metric]
            ratios.append(Ratio(f"DQN CartPole {METRIC_TITLES[metric]}: {TITLES[side]} / RLlib", r["value"],
                                target=f"{op} {limit}", verdict=entry["all"]["verdict"],
                                note={"exact": "", "at_most": "at most", "at_least": "at least"}.get(r["kind"] or "",
                                                                                                       ""),
                                ours="sum over seeds", peer="sum over seeds"))
    rows = []
    for r in result["runs"]:
        if "error" in r:
            rows.append([TITLES[r["side"]], r["seed"], "failed: " + r["error"], None, None, None, None])
            continue
        last = r["curve"][-1]["screen_mean"] if r["curve"] else None
        rows.append([TITLES[r["side"]], r["seed"], "solved" if r["solved"] else f"not solved ({r['stop_reason']})",
                     r["solved_at"] if r["solved"] else r["env_steps"], r["train_s"], r["eval_s"], last])
    crit, budget = result["config"]["criterion"], result["config"]["budget"]
    table = Table(title="Runs (interleaved by seed; each a fresh one-thread subprocess)",
                  header=["side", "seed", "outcome", "env steps (at solving or stop)", "training s", "evaluation s",
                          "last greedy return"], rows=rows)
    notes = [f"Solved: greedy mean return >= {crit['min_return']} over {crit['eval_episodes']} episodes (screened "
             f"on the first {crit['screen_episodes']}), evaluated every {crit['eval_every']} env steps; curves show "
             "the screening mean (played at every evaluation).",
             f"Budget per run: {budget['env_steps']:,} env steps or {budget['seconds']:g} s of training and "
             "evaluation, whichever comes first: a ratio of unsolved runs is a bound ('at most' / 'at least') or "
             "undetermined.",
             "Band: 95% Student-t interval of the mean over the seeds that reached that evaluation.",
             f"RLlib: {result['rllib_note'] or 'measured in the same run'}.", *reading(result),
             *(f"Note written by hand after the run: {n}" for n in result.get("notes") or [])]
    tables = [table, settings_table(result)] if result.get("our_config") else [table]
    return [Figure(name="learning", title="DQN learning curves on CartPole-v1", figure_ref="RLgraph Fig. 7b (CartPole)",
                   panels=[steps, wall], series=series, ratios=ratios, tables=tables, notes=notes,
                   peer_missing=result["rllib_note"], raw=result, headline=headline(result))]


def headline(result: dict[str, Any]) -> str:
    """Env steps and training wall time to solve, ours / RLlib per backend (or the runs solved, without RLlib)."""
    if not result["comparison"]:
        solved = sum(bool(r.get("solved")) for r in result["runs"])
        return f"{solved} of {len(result['runs'])} runs solved CartPole-v1 (RLlib not measured)"
    return "; ".join(f"{TITLES[side]} / RLlib: env steps {fmt_ratio(m['env_steps']['all'])}, training wall time "
                     f"{fmt_ratio(m['train_s']['all'])}" for side, m in result["comparison"].items())


def reading(result: dict[str, Any]) -> list[str]:
    """The verdict in sentences, generated from the numbers."""
    if not result["comparison"]:
        return [f"RLlib was not measured ({result['rllib_note']}): no verdict against the targets."]
    lines = []
    for side, metrics in result["comparison"].items():
        steps, wall = metrics["env_steps"]["all"], metrics["train_s"]["all"]
        per_seed = {m: [r["verdict"] for r in metrics[m]["per_seed"].values()] for m in metrics}
        lines.append(f"**{SIDE_TITLES[side]}**: fewer env steps than RLlib: **{steps['verdict']}** "
                     f"(ratio {fmt_ratio(steps)}; per seed {', '.join(per_seed['env_steps'])}); at most half "
                     f"RLlib's training wall time: **{wall['verdict']}** (ratio {fmt_ratio(wall)}; per seed "
                     f"{', '.join(per_seed['train_s'])}); with evaluation time counted: "
                     f"{metrics['train_eval_s']['all']['verdict']} ({fmt_ratio(metrics['train_eval_s']['all'])})"
                     + (f"; the ratio of the median training wall times over seeds: "
                        f"{fmt_ratio(metrics['train_s']['median'])} ({metrics['train_s']['median']['verdict']})"
                        if "median" in metrics["train_s"] else "") + ".")
    unsolved = [f"{SIDE_TITLES[r['side']]} seed {r['seed']}" for r in result["runs"]
                if "error" not in r and not r["solved"]]
    failed = [f"{SIDE_TITLES[r['side']]} seed {r['seed']} ({r['error']})" for r in result["runs"] if "error" in r]
    if unsolved:
        lines.append(f"Not solved within the budget: {', '.join(unsolved)}; their values are lower bounds, "
                     "so ratios involving them are bounds (≤ / ≥).")
    if failed:
        lines.append(f"Failed runs: {', '.join(failed)}.")
    spread = []
    for side in result["config"]["sides"]:
        solved = sorted(r["solved_at"] for r in result["runs"] if r["side"] == side and r.get("solved"))
        if len(solved) > 1:
            spread.append(f"{SIDE_TITLES[side]} {solved[0]:,}-{solved[-1]:,}")
    n = len(result["config"]["seeds"])
    lines.append(f"{n} seed{'s' if n != 1 else ''} per side"
                 + (f"; env steps to solve ranged over seeds: {'; '.join(spread)}" if spread else "")
                 + ". Few seeds: the ratios indicate, they do not establish a statistically tested difference.")
    return lines


def settings_table(result: dict[str, Any]) -> Table:
    """Our config beside the RLlib settings actually built (read from the RLlib run's config)."""
    ours = result["our_config"]
    rl = next((r["settings"] for r in result["runs"] if r.get("side") == "rllib" and "settings" in r), None)
    layers = ", ".join(f"{l['units']} {l.get('activation', 'linear')}" for l in ours["network"]["layers"])
    upd, loss, tgt, exp = ours["update"], ours["loss"], ours["target_sync"], ours["exploration"]
    our_col = {
        "network": f"4 → {layers} → dueling: linear V (1) and A (2) heads" if ours["network"].get("dueling")
        else f"4 → {layers} → linear Q (2)",
        "optimizer, lr": f"{ours['optimizer']['type']}, {ours['optimizer']['learning_rate']:g}, grad-norm clip "
                         f"{ours['optimizer'].get('clip_grad_norm')}",
        "replay": f"{ours['memory']['type']} (uniform), capacity {ours['memory']['capacity']:,}",
        "batch, updates": f"{upd['batch_size']} per update, {upd['repeats']} update every {upd['every']} env "
                          f"step(s) from {upd['start_after']:,} steps: "
                          f"{upd['batch_size'] * upd['repeats'] / upd['every']:g} replayed transitions per env step",
        "n-step": str(loss["n_step"]),
        "double Q / dueling": f"{loss['double_q']} / {ours['network'].get('dueling', False)}",
        "loss": f"Huber (delta {loss['huber_delta']}), gamma {loss['gamma']}",
        "target network": f"soft update every {tgt['every']} update(s), tau {tgt['tau']}",
        "epsilon": f"{exp['type']} {exp['from']} → {exp['to']} over {exp['steps']:,} env steps",
    }
    rl_col: dict[str, str] = {}
    if rl is not None:
        nstep = rl["n_step"]
        frag = rl["rollout_fragment_length"]
        rl_col = {
            "network": f"4 → {rl['model']['fcnet_hiddens']} {rl['model']['fcnet_activation']} → dueling: V and A "
                       f"streams each with a {rl['model']['head_fcnet_hiddens']} relu hidden layer",
            "optimizer, lr": f"adam, {rl['lr']:g}, grad clip {rl['grad_clip']} ({rl['grad_clip_by']})",
            "replay": f"{rl['replay_buffer_config']['type']} (alpha {rl['replay_buffer_config'].get('alpha')}, beta "
                      f"{rl['replay_buffer_config'].get('beta')}), capacity {rl['replay_buffer_config']['capacity']:,}",
            "batch, updates": f"{rl['train_batch_size_per_learner']} per update, 1 update per {frag} sampled env "
                              f"steps from {rl['num_steps_sampled_before_learning_starts']:,} steps: "
                              f"{rl['train_batch_size_per_learner'] / frag:g} replayed transitions per env step",
            "n-step": (f"drawn per sampled transition: `rng.integers({nstep[0]}, {nstep[1]})`, i.e. "
                       f"{nstep[0]}-{nstep[1] - 1}" if isinstance(nstep, list) else str(nstep)),
            "double Q / dueling": f"{rl['double_q']} / {rl['dueling']}",
            "loss": f"{rl['td_error_loss_fn']}, gamma {rl['gamma']}",
            "target network": f"hard copy (tau {rl['tau']}) every {rl['target_network_update_freq']} sampled env "
                              "steps",
            "epsilon": "piecewise " + " → ".join(f"{e:g} at {t:,}" for t, e in rl["epsilon"]) + " env steps",
        }
    return Table(title="Settings: ours beside RLlib's (as built)",
                 header=["setting", f"ours (`{result['config']['agent_config']}`)", "RLlib (its tuned example)"],
                 rows=[[key, value, rl_col.get(key, "n/a")] for key, value in our_col.items()])



def budgets(quick: bool) -> tuple[Any, Any]:
    """``(Criterion, Budget)`` of the quick or the full report."""
    from spacegraph.reports.learning_criterion import Budget, Criterion

    if quick:
        return (Criterion(eval_every=1000, eval_episodes=10, screen_episodes=3),
                Budget(env_steps=2000, seconds=45.0, grace_seconds=120.0))
    return Criterion(), Budget()


def run(ctx: Context) -> list[Figure]:
    from spacegraph.reports.learning_runs import measure

    criterion, budget = budgets(ctx.quick)
    sides = SIDES if ctx.peers else SIDES[:2]
    result = measure(seeds=tuple(range(ctx.seeds)), sides=sides, criterion=criterion, budget=budget,
                     log=lambda line: ctx.progress.step(line))
    if not ctx.peers:
        result["rllib_note"] = "peers not requested (--no-peers)"
    return figures(result)


SCENARIO = register(Scenario(name="learning", title="DQN learning curves", figure_ref="RLgraph Fig. 7b", run=run,
                             steps=lambda ctx: ctx.seeds * (len(SIDES) if ctx.peers else 2),
                             render=figures))
