"""Central batched inference (SEED RL style) against IMPALA's actor-learner mode, as the network grows.

Both modes train the same IMPALA config with one learner and ``n`` actors for a window after warm-up:

* ``actor-learner``: every actor holds a copy of the policy and acts itself (on the CPU), the learner
  publishes weights after each update (`ActorLearnerWorker`);
* ``central``: actors only step environments; the learner batches their requests (up to ``n`` per call,
  2 ms timeout) and acts for all of them with the only copy of the policy, on the learner's device
  (`CentralInferenceWorker`).

Measured per point: env frames/s learned from, learner updates, and (central) the achieved inference
batch in environments. Networks: ``mlp`` (CartPole, 2x64), ``mlp+lstm`` (and an LSTM of 64),
``mlp-1m`` (CartPole, 4x512 dense, ~0.8M parameters), ``resnet`` (Pong, IMPALA's deep ResNet,
`impala_resnet_layers`, 1.09M), ``resnet+lstm`` (and an LSTM of 256), ``nature`` (Pong, the Nature
CNN, 1.7M) and ``nature+lstm`` (and an LSTM of 256). Transports: ``threads`` (actors as threads of the
learner's process: any machine, GIL-bound) or ``tf-dist`` (actor processes, TF servers on 127.0.0.1).
Each point runs in its own process::

    python -m spacegraph.reports.central_inference [--networks mlp,nature] [--actors 2,4,8,16]
        [--transport threads|tf-dist] [--device cuda:0] [--seconds 10] [--out-dir reports]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

REPORT_DIR = Path(__file__).resolve().parents[2] / "reports"
DENSE = [{"type": "dense", "units": 64, "activation": "tanh"}] * 2
NETWORKS = {
    "mlp": ("impala_cartpole", {"network": {"layers": DENSE, "lstm_units": None}}),
    "mlp+lstm": ("impala_cartpole", {"network": {"layers": DENSE, "lstm_units": 64}}),
    "mlp-1m": ("impala_cartpole", {"network": {"layers": [{"type": "dense", "units": 512, "activation": "relu"}] * 4,
                                               "lstm_units": None}}),
    "resnet": ("impala_pong", {"network": {"layers": "impala_resnet", "lstm_units": None}}),
    "resnet+lstm": ("impala_pong", {"network": {"layers": "impala_resnet", "lstm_units": 256}}),
    "nature": ("impala_pong", {}),
    "nature+lstm": ("impala_pong", {"network": {"layers": "nature", "lstm_units": 256}}),
}
MODES = ("actor-learner", "central")


def _agent(network: str, device: str | None) -> Any:
    import yaml

    from reference_agents.agents import CONFIG_DIR, IMPALAAgent

    name, changes = NETWORKS[network]
    with open(os.path.join(CONFIG_DIR, name + ".yaml")) as fh:
        cfg = yaml.safe_load(fh)
    cfg.update(changes)
    return IMPALAAgent(cfg, backend="torch", seed=0, device=device)


def _executor(transport: str, actors: int, queues: dict, weights: dict) -> Any:
    if transport == "tf-dist":
        from harness.execution.tf_dist import TFActorLearnerExecutor

        return TFActorLearnerExecutor(actors, queues, weights)
    from harness.execution.transport import ThreadActorLearnerExecutor

    return ThreadActorLearnerExecutor(actors, queues, weights)


def measure(mode: str, network: str, actors: int, seconds: float, transport: str, device: str | None) -> dict:
    """One point, in this process: frames/s learned from over ``seconds`` after every actor delivered."""
    from reference_agents.agents.impala.actor_learner import ActorLearnerWorker, actor_learner_queues
    from reference_agents.agents.impala.central_inference import CentralInferenceWorker

    agent = _agent(network, device)
    params = int(sum(v.size for v in agent.get_weights().values()))
    if mode == "central":
        worker = CentralInferenceWorker(agent, lambda q: _executor(transport, actors, q, {}), actors)
    else:
        worker = ActorLearnerWorker(agent, lambda r, e, w: _executor(
            transport, actors, actor_learner_queues(r, e, actors), w))
    chunk = agent.config.rollout.length * agent.config.env.num_envs * agent.config.rollout.batch_size
    try:
        deadline = time.monotonic() + 180
        while len(worker.received) < actors and time.monotonic() < deadline:
            worker.run(num_steps=chunk)
        frames0, updates0 = worker.total_frames, worker.total_updates
        batches0 = dict(getattr(worker, "batch_sizes", {}))
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            worker.run(num_steps=chunk)
        elapsed = time.perf_counter() - start
        out = {"frames_per_s": (worker.total_frames - frames0) / elapsed, "updates_per_s":
               (worker.total_updates - updates0) / elapsed, "params": params, "actors_delivering": len(worker.received)}
        if mode == "central":
            sizes = {k: v - batches0.get(k, 0) for k, v in worker.batch_sizes.items()}
            calls = sum(sizes.values())
            out["mean_batch_envs"] = (sum(k * v for k, v in sizes.items()) / calls * agent.config.env.num_envs
                                      if calls else 0.0)
            out["inference_calls_per_s"] = calls / elapsed
        return out
    finally:
        worker.close()


def run_child(mode: str, network: str, actors: int, seconds: float, transport: str = "threads",
              device: str | None = None, timeout: float = 400.0) -> dict[str, Any]:
    """One point of `measure` in a fresh process (what a run leaves behind, threads and TF state, stays there):
    its result, or ``{"error": why}`` when the process failed or ran past ``timeout`` seconds."""
    cmd = [sys.executable, "-m", "spacegraph.reports.central_inference", "--child", mode, network, str(actors),
           "--seconds", str(seconds), "--transport", transport, *(["--device", device] if device else [])]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SPACEGRAPH_VALIDATE": "0", "TF_CPP_MIN_LOG_LEVEL": "3"}
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode == 0 and lines:
        return json.loads(lines[-1])
    return {"error": (done.stderr.strip().splitlines() or ["no output"])[-1][:300]}


def markdown(result: dict[str, Any]) -> str:
    lines = [f"# Central inference (SEED style) against actor-learner IMPALA ({result['device_label']})", "",
             f"Measured {result['date']} on {result['machine']} (commit {result['commit']}); transport "
             f"`{result['transport']}`, learner on `{result['device'] or 'cpu'}`, actors' own policies (actor-learner "
             f"mode) on the CPU; {result['seconds']:.0f} s windows after every actor delivered; PyTorch backend. "
             "Frames/s: env frames of the rollouts the learner learned from. Batch: the central mode's achieved "
             "inference batch in environments (requests x envs per actor)."
             + (f" 1-minute load average {result['load_average_start']:.1f} at the start and "
                f"{result['load_average_end']:.1f} at the end." if "load_average_end" in result else ""), "",
             "| network | params | actors | actor-learner frames/s | central frames/s | central / actor-learner | "
             "central batch (envs) | learner updates/s (actor-learner / central) |", "|---|---|---|---|---|---|---|---|"]
    for network, rows in result["points"].items():
        for n in result["actors"]:
            al, ce = rows.get(f"actor-learner-{n}", {}), rows.get(f"central-{n}", {})

            def rate(r: dict) -> str:
                return f"{r['frames_per_s']:,.0f}" if "frames_per_s" in r else f"({r.get('error', 'not run')})"

            ratio = (f"{ce['frames_per_s'] / al['frames_per_s']:.2f}x" if al.get("frames_per_s") and
                     "frames_per_s" in ce else "-")
            params = ce.get("params", al.get("params", 0))
            updates = " / ".join(f"{r['updates_per_s']:.2f}" if "updates_per_s" in r else "-" for r in (al, ce))
            lines.append(f"| {network} | {params:,} | {n} | {rate(al)} | {rate(ce)} | {ratio} | "
                         f"{ce.get('mean_batch_envs', 0):.1f} | {updates} |")
    lines += ["", *(f"- {note}" for note in result.get("notes", [])), "",
              "Reproduce: `python -m spacegraph.reports.central_inference` (see its docstring for the options)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any] | None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--networks", default="mlp,mlp+lstm,mlp-1m,resnet,resnet+lstm,nature,nature+lstm")
    parser.add_argument("--actors", default="2,4,8,16")
    parser.add_argument("--transport", choices=["threads", "tf-dist"], default="threads")
    parser.add_argument("--device", default=None, help="the learner's device (cuda:0 on a GPU machine)")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--timeout", type=float, default=400.0, help="seconds per point at most")
    parser.add_argument("--out-dir", default=str(REPORT_DIR))
    parser.add_argument("--stem", default="central_inference")
    parser.add_argument("--note", action="append", default=[])
    parser.add_argument("--commit", help="the commit measured (default: git rev-parse of the checkout)")
    parser.add_argument("--child", nargs=3, metavar=("MODE", "NETWORK", "ACTORS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        mode, network, actors = args.child
        print(json.dumps(measure(mode, network, int(actors), args.seconds, args.transport, args.device)))
        return None
    from harness.measure.host import describe, facts

    commit = args.commit or subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                           cwd=REPORT_DIR.parent).stdout.strip() or "unknown"
    info = facts()
    actors = [int(a) for a in args.actors.split(",")]
    result = {"date": time.strftime("%Y-%m-%d"), "machine": describe(info), "commit": commit,
              "transport": args.transport, "device": args.device, "seconds": args.seconds, "actors": actors,
              "device_label": "GPU: " + "; ".join(info["gpus"]) if args.device and info.get("gpus") else "CPU only",
              "points": {}, "notes": list(args.note), "load_average_start": os.getloadavg()[0]}
    for network in args.networks.split(","):
        rows = result["points"].setdefault(network, {})
        for n in actors:
            for mode in MODES:
                rows[f"{mode}-{n}"] = run_child(mode, network, n, args.seconds, args.transport, args.device,
                                                args.timeout)
                print(network, mode, n, rows[f"{mode}-{n}"], flush=True)
    result["load_average_end"] = os.getloadavg()[0]
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.stem}.json").write_text(json.dumps(result, indent=1))
    (out / f"{args.stem}.md").write_text(markdown(result))
    print(markdown(result))
    return result


if __name__ == "__main__":
    main()
