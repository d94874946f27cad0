"""Multi-device report: update steps/s and samples/s of synchronous replicas (`SyncReplicas`) at 1, 2, 4 replicas.

For each backend and loss (the DQN and the IMPALA learner of `multi_device_graphs`) it times the update
method of the plain graph (``single``: no strategy) and of the expanded graph at each replica count, with
the replicas on the given devices (cycled: ``--devices cuda:0`` puts every replica on one GPU). Each
figure is the median of ``--repeats`` timed runs of at least ``--seconds`` each, after a warm-up, in one
process. Samples are rows of the batch (DQN) or rollout steps ``T x B`` (IMPALA).

Run::

    python -m spacegraph.reports.multi_device --backend torch --devices cuda:0 --out DIR
    python -m spacegraph.reports.multi_device --backend torch,tf --out reports   # here: logical CPUs

``--backend torch`` never imports TensorFlow (the JSON records whether it was imported). TF devices
default to logical CPUs ``/cpu:0``-``/cpu:3`` made before TensorFlow starts; PyTorch devices to ``cpu``.
It writes ``multi_device.json`` and ``multi_device.md`` to ``--out`` (and ``multi_device.png`` where
matplotlib is installed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Any, Sequence

NOTE_LOGICAL = (
    "Logical devices (TF logical CPUs, or several PyTorch replicas on `cpu`) share the same cores and memory: "
    "they show that the expanded graph builds, places its towers, shards the batch and synchronizes "
    "(what the tests check for correctness), and they measure the strategy's overhead (sharding, one tower "
    "call per replica, gradient averaging, broadcasting the weights back). They cannot show a speed-up: "
    "the replicas' work runs on the same cores, one after another or competing for them, so the figures "
    "fall with more replicas. Whether replicas pay off needs separate physical devices (several GPUs) with "
    "a model large enough that the per-replica compute outweighs the copies.")


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, timeout=10).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "") if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _machine(backend_names: Sequence[str]) -> dict[str, Any]:
    info: dict[str, Any] = {"python": platform.python_version(), "platform": platform.platform(),
                            "cpus": os.cpu_count(), "load_average": list(os.getloadavg())}
    if "torch" in backend_names:
        import torch

        info["torch"] = torch.__version__
        info["cuda"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    if "tf" in backend_names:
        import tensorflow as tf

        info["tensorflow"] = tf.__version__
    return info


def time_updates(executor: Any, method: str, args: tuple, seconds: float) -> float:
    """Updates/s over one run of at least ``seconds``."""
    n, start = 0, time.perf_counter()
    while True:
        executor.execute(method, *args)
        n += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return n / elapsed


def measure(backends: Sequence[str], losses: Sequence[str], replicas: Sequence[int], devices: dict[str, list[str]],
            batch: int, hidden: Sequence[int], seconds: float, repeats: int, warmup: int = 5) -> list[dict[str, Any]]:
    """One row per backend, loss and setting (``single`` and each replica count).

    The settings of one backend and loss are built first, warmed up, then timed in ``repeats``
    interleaved rounds (one run of each setting per round), so that load drifting over the
    measurement affects them alike; each figure is the median of its rounds.
    """
    from spacegraph.reports import multi_device_graphs as mdg

    rows = []
    for backend in backends:
        for loss in losses:
            method = mdg.UPDATES[loss][0]
            args = mdg.batch(loss, batch)
            samples = batch * (args[1].shape[0] if loss == "impala" else 1)
            first = devices[backend][0]
            settings = []  # (name, replicas, devices, executor, rates)
            for name, count in [("single", None), (f"single on {first}", None),
                                *((f"{n} replicas", n) for n in replicas)]:
                devs = None if count is None else [devices[backend][i % len(devices[backend])] for i in range(count)]
                placed = {loss: first} if name != "single" and count is None else None  # the root's scope is the loss name
                executor = mdg.build(loss, backend, devs, hidden=hidden, device_map=placed)
                for _ in range(warmup):
                    executor.execute(method, *args)
                settings.append((name, count, devs or ([first] if placed else ["default"]), executor, []))
            for _ in range(repeats):
                for _, _, _, executor, rates in settings:
                    rates.append(time_updates(executor, method, args, seconds))
            for name, count, devs, executor, rates in settings:
                rate = statistics.median(rates)
                rows.append({"backend": backend, "loss": loss, "replicas": count or 0, "setting": name,
                             "devices": devs, "batch": batch, "samples_per_update": samples,
                             "updates_per_s": rate, "samples_per_s": rate * samples, "rounds": rates})
                print(f"{backend:5s} {loss:6s} {name:18s} {rate:9.1f} updates/s "
                      f"{rate * samples:11.0f} samples/s  {devs}", flush=True)
    return rows


def markdown(result: dict[str, Any]) -> str:
    """The report text."""
    lines = ["# Synchronous replicas: update throughput at 1, 2, 4 replicas", "",
             f"Measured at commit `{result['commit']}` on {result['machine_name']} "
             f"({result['machine']['cpus']} CPUs, 1-minute load average {result['machine']['load_average'][0]:.2f} "
             f"at the start, {result['load_average_end'][0]:.2f} at the end), {result['date']}.", "",
             f"Batch {result['batch']} (DQN: records; IMPALA: rollouts of 5 steps, so 5 x {result['batch']} "
             f"samples per update), MLP {result['hidden']}; each figure the median of {result['repeats']} runs of "
             f"at least {result['seconds']} s, the settings of a backend and loss timed in interleaved rounds. "
             f"`single` is the graph without a strategy on the default device; `single on D` the same graph placed "
             f"on the first device (the baseline replicas compare with: on PyTorch a placed step runs under a "
             f"`torch.device` context, which costs per op even on `cpu`); `N replicas` the graph `SyncReplicas` "
             f"expanded (N = 1 is the strategy's own overhead: sharding, the gradient tower, the weighted step).", "",
             "Command:", "", "```bash", result["command"], "```", "",
             "| backend | loss | setting | devices | updates/s | samples/s | rounds min-max (updates/s) | "
             "vs single on the first device |",
             "|---|---|---|---|---:|---:|---:|---:|"]
    placed = {(r["backend"], r["loss"]): r["updates_per_s"] for r in result["rows"]
              if r["setting"].startswith("single on")}
    for r in result["rows"]:
        ratio = r["updates_per_s"] / placed[(r["backend"], r["loss"])]
        lines.append(f"| {r['backend']} | {r['loss']} | {r['setting']} | {', '.join(r['devices'])} | "
                     f"{r['updates_per_s']:.1f} | {r['samples_per_s']:.0f} | "
                     f"{min(r['rounds']):.0f}-{max(r['rounds']):.0f} | {ratio:.2f} |")
    lines += ["", "## What these figures can and cannot show", "", result["note"], ""]
    if result.get("tensorflow_imported") is not None:
        lines += [f"TensorFlow imported by this run: {result['tensorflow_imported']}.", ""]
    return "\n".join(lines)


def plot(result: dict[str, Any], path: str) -> bool:
    """A bar chart of samples/s per setting (False when matplotlib is missing)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    groups = sorted({(r["backend"], r["loss"]) for r in result["rows"]})
    fig, axes = plt.subplots(1, len(groups), figsize=(3.2 * len(groups), 3.2), squeeze=False)
    for ax, (backend, loss) in zip(axes[0], groups):
        rows = [r for r in result["rows"] if (r["backend"], r["loss"]) == (backend, loss)]
        ax.bar([r["setting"].replace(" replicas", "").replace("single on ", "on\n") for r in rows],
               [r["samples_per_s"] for r in rows])
        ax.set_title(f"{backend} {loss}")
        ax.set_xlabel("replicas")
        ax.set_ylabel("samples/s")
    fig.suptitle(f"SyncReplicas on {result['machine_name']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spacegraph.reports.multi_device", description=__doc__.split("\n")[0])
    parser.add_argument("--backend", default="torch,tf", help="comma list of tf, torch (default both)")
    parser.add_argument("--devices", default=None,
                        help="comma list of devices the replicas cycle over (default: tf /cpu:0-/cpu:3, torch cpu)")
    parser.add_argument("--replicas", default="1,2,4", help="comma list of replica counts")
    parser.add_argument("--loss", default="dqn,impala", help="comma list of dqn, impala")
    parser.add_argument("--batch", type=int, default=64, help="rows per update (IMPALA: rollouts)")
    parser.add_argument("--hidden", default="64,64", help="MLP layer sizes")
    parser.add_argument("--seconds", type=float, default=1.0, help="minimum seconds per timed run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--machine", default=None, help="the machine's name for the report (default: hostname)")
    parser.add_argument("--out", required=True, help="folder for multi_device.json/.md(/.png)")
    args = parser.parse_args(argv)
    backends = [b.strip() for b in args.backend.split(",") if b.strip()]
    bad = [b for b in backends if b not in ("tf", "torch")]
    if bad or not backends:
        parser.error(f"--backend: expected a comma list of tf, torch; got {args.backend!r}")
    losses = [s.strip() for s in args.loss.split(",")]
    if any(s not in ("dqn", "impala") for s in losses):
        parser.error(f"--loss: expected a comma list of dqn, impala; got {args.loss!r}")
    try:
        replicas = [int(s) for s in args.replicas.split(",")]
        hidden = [int(s) for s in args.hidden.split(",")]
    except ValueError:
        parser.error("--replicas and --hidden take comma lists of integers")
    if args.batch < max(replicas):
        parser.error(f"--batch {args.batch} must be at least the largest replica count {max(replicas)}")
    given = [d.strip() for d in args.devices.split(",")] if args.devices else None
    devices: dict[str, list[str]] = {}
    if "tf" in backends:
        from harness.backends.tf.devices import logical_cpus

        cpus = logical_cpus(4)
        devices["tf"] = given or cpus
    if "torch" in backends:
        devices["torch"] = given or ["cpu"]
    os.makedirs(args.out, exist_ok=True)
    load_start = list(os.getloadavg())
    rows = measure(backends, losses, replicas, devices, args.batch, hidden, args.seconds, args.repeats)
    real = given and any(d.startswith(("cuda", "/gpu", "gpu")) for d in given)
    result = {"commit": _commit(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "machine_name": args.machine or platform.node(), "machine": {**_machine(backends), "load_average": load_start},
              "command": "python -m spacegraph.reports.multi_device " + " ".join(argv if argv is not None else sys.argv[1:]),
              "batch": args.batch, "hidden": hidden, "seconds": args.seconds, "repeats": args.repeats,
              "devices": devices, "rows": rows, "load_average_end": list(os.getloadavg()), "tensorflow_imported": "tensorflow" in sys.modules,
              "note": ("Devices given: " + ", ".join(given) + ". Replicas beyond the number of devices share one. "
                       if real else "") + NOTE_LOGICAL}
    with open(os.path.join(args.out, "multi_device.json"), "w") as fh:
        json.dump(result, fh, indent=1)
    with open(os.path.join(args.out, "multi_device.md"), "w") as fh:
        fh.write(markdown(result))
    plotted = plot(result, os.path.join(args.out, "multi_device.png"))
    print(f"wrote {args.out}/multi_device.json, multi_device.md{', multi_device.png' if plotted else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
