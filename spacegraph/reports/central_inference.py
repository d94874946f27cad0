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
learner's process: any machine, GIL-bound), ``tf-dist`` (actor processes, TF servers on 127.0.0.1) or
``grpc`` (actor processes on the learner's gRPC stream, as ``spacegraph train --executor seed`` runs them).
Each point runs in its own process (`run_child`); `measure_all` runs them all. The figure is the
``central_inference`` scenario of ``spacegraph report``.

`ab` is an interleaved A/B of central inference with inference and learning overlapping (``central``)
against the same worker with one lock for both (``central-locked``, `CentralInferenceWorker` with
``overlap=False``): round after round, each in a fresh child process, the ratio paired within a round and
its median over the rounds::

    python -m spacegraph.reports.central_inference --ab nature 4 --rounds 3 --seconds 8
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

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
TRANSPORTS = ("threads", "tf-dist", "grpc")
#: What `measure` also takes: central inference with one lock for inference and updates (`ab`'s baseline).
LOCKED = "central-locked"


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
    if transport == "grpc":
        from harness.execution.grpc_stream import GrpcActorLearnerExecutor

        return GrpcActorLearnerExecutor(actors, queues, weights)
    from harness.execution.transport import ThreadActorLearnerExecutor

    return ThreadActorLearnerExecutor(actors, queues, weights)


def measure(mode: str, network: str, actors: int, seconds: float, transport: str, device: str | None) -> dict:
    """One point, in this process: frames/s learned from over ``seconds`` after every actor delivered.

    Raises:
        ValueError: naming the mode or network when it is not one of `MODES` or `NETWORKS`.
    """
    if mode not in (*MODES, LOCKED) or network not in NETWORKS:
        raise ValueError(f"central_inference.measure: mode must be one of {(*MODES, LOCKED)} and network one of "
                         f"{', '.join(NETWORKS)}; got {mode!r}, {network!r}")
    from reference_agents.agents.impala.actor_learner import ActorLearnerWorker, actor_learner_queues
    from reference_agents.agents.impala.central_inference import CentralInferenceWorker

    agent = _agent(network, device)
    params = int(sum(v.size for v in agent.get_weights().values()))
    central = mode != "actor-learner"
    if central:
        worker = CentralInferenceWorker(agent, lambda q: _executor(transport, actors, q, {}), actors,
                                        overlap=mode != LOCKED)
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
        if central:
            out["policy_lag_mean"] = worker.policy_lag_mean()
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


def measure_all(networks: list[str] | tuple[str, ...] = tuple(NETWORKS),
                actors: list[int] | tuple[int, ...] = (2, 4, 8, 16), transport: str = "threads",
                device: str | None = None, seconds: float = 10.0, timeout: float = 400.0,
                log: Any = None) -> dict[str, Any]:
    """Both modes for every network and actor count, each point in a fresh process (`run_child`).

    Args:
        transport: one of `TRANSPORTS` (``tf-dist`` and ``grpc``: actor processes).
        device: the learner's device (``cuda:0`` on a GPU machine; None: the CPU).
        log: called with a line per point.

    Raises:
        ValueError: naming the argument for an unknown network or transport.
    """
    bad = [n for n in networks if n not in NETWORKS]
    if bad or transport not in TRANSPORTS:
        raise ValueError(f"central_inference.measure_all: networks must be among {', '.join(NETWORKS)} and "
                         f"transport one of {', '.join(TRANSPORTS)}; got {bad or list(networks)}, {transport!r}")
    from harness.measure.host import describe, facts
    from harness.measure.machine import git_revision

    info = facts()
    result: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"), "machine": describe(info), "commit": git_revision()[:7],
        "transport": transport, "device": device, "seconds": seconds, "actors": list(actors),
        "device_label": "GPU: " + "; ".join(info["gpus"]) if device and info.get("gpus") else "CPU only",
        "points": {}, "notes": [], "load_average_start": os.getloadavg()[0]}
    for network in networks:
        rows = result["points"].setdefault(network, {})
        for n in actors:
            for mode in MODES:
                rows[f"{mode}-{n}"] = point = run_child(mode, network, n, seconds, transport, device, timeout)
                if log:
                    log(f"{network} {mode} {n} actors: {point.get('frames_per_s', point.get('error'))}")
    result["load_average_end"] = os.getloadavg()[0]
    return result


def ab(network: str, actors: int, rounds: int = 3, seconds: float = 8.0, transport: str = "threads",
       device: str | None = None, timeout: float = 400.0, log: Any = None) -> dict[str, Any]:
    """Central inference overlapping with learning against the locked worker, interleaved: each round runs
    ``central-locked`` then ``central`` (each `run_child`), and the ratio of their frames/s is taken within
    the round (a shared machine's load drifts between rounds more than within one).

    Args:
        network: one of `NETWORKS`.
        actors: actors (threads or processes, by ``transport``: one of `TRANSPORTS`).
        rounds: rounds of the pair.
        seconds: each point's window after every actor delivered.
        log: called with a line per point.

    Returns:
        ``{"network", "actors", "transport", "seconds", "points": {mode: [point per round]}, "ratios": [per
        round], "median_ratio", "median_frames_per_s": {mode: ...}}`` (a failed point: no ratio that round).

    Raises:
        ValueError: naming the argument for an unknown network or transport, or rounds below 1.
    """
    if network not in NETWORKS or transport not in TRANSPORTS or rounds < 1:
        raise ValueError(f"central_inference.ab: network must be one of {', '.join(NETWORKS)}, transport one of "
                         f"{', '.join(TRANSPORTS)} and rounds at least 1; got {network!r}, {transport!r}, {rounds}")
    points: dict[str, list[dict[str, Any]]] = {LOCKED: [], "central": []}
    ratios = []
    for r in range(rounds):
        for mode in points:
            points[mode].append(run_child(mode, network, actors, seconds, transport, device, timeout))
            if log:
                log(f"round {r + 1} {mode}: {points[mode][-1]}")
        locked, ours = points[LOCKED][-1].get("frames_per_s"), points["central"][-1].get("frames_per_s")
        if locked and ours is not None:
            ratios.append(ours / locked)
    medians = {m: statistics.median(fps) if (fps := [p["frames_per_s"] for p in ps if "frames_per_s" in p]) else None
               for m, ps in points.items()}
    return {"network": network, "actors": actors, "transport": transport, "seconds": seconds, "points": points,
            "ratios": ratios, "median_ratio": statistics.median(ratios) if ratios else None,
            "median_frames_per_s": medians}


def child_main(argv: list[str] | None = None) -> None:
    """One point in this process (``--child``, the child of `run_child`: not a user command), or `ab` (``--ab``);
    the result as a JSON line."""
    parser = argparse.ArgumentParser(description="one central-inference point (--child: the child process of "
                                                 "run_child), or the overlap-against-locked A/B (--ab)")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--child", nargs=3, metavar=("MODE", "NETWORK", "ACTORS"))
    what.add_argument("--ab", nargs=2, metavar=("NETWORK", "ACTORS"),
                      help="rounds of central-locked then central, each point in a fresh process")
    parser.add_argument("--seconds", type=float, default=8.0, help="each point's window (default 8)")
    parser.add_argument("--rounds", type=int, default=3, help="--ab: rounds (default 3)")
    parser.add_argument("--transport", choices=TRANSPORTS, default="threads")
    parser.add_argument("--device", default=None)
    args = parser.parse_args(argv)
    if args.ab:
        network, actors = args.ab
        if not actors.isdigit() or int(actors) < 1:
            parser.error(f"--ab NETWORK ACTORS: ACTORS must be a positive int; got {actors!r}")
        try:
            result = ab(network, int(actors), args.rounds, args.seconds, args.transport, args.device,
                        log=lambda line: print(line, file=sys.stderr, flush=True))
        except ValueError as exc:
            parser.error(str(exc))
        print(json.dumps(result))
        return
    mode, network, actors = args.child
    print(json.dumps(measure(mode, network, int(actors), args.seconds, args.transport, args.device)))


if __name__ == "__main__":
    child_main()
