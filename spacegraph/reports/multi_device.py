"""Multi-device report: update steps/s and samples/s of synchronous replicas (`SyncReplicas`) at 1, 2, 4 replicas.

For each backend and loss (the DQN and the IMPALA learner of `multi_device_graphs`) it times the update
method of the plain graph (``single``: no strategy) and of the expanded graph at each replica count, with
the replicas on the given devices (cycled: ``--devices cuda:0`` puts every replica on one GPU). Each
figure is the median of ``--repeats`` timed runs of at least ``--seconds`` each, after a warm-up, in one
process. Samples are rows of the batch (DQN) or rollout steps ``T x B`` (IMPALA).

`result_isolated` measures in a fresh interpreter; a PyTorch-only run never imports TensorFlow (the result
records whether it was imported). TF devices default to logical CPUs ``/cpu:0``-``/cpu:3`` made before
TensorFlow starts; PyTorch devices to ``cpu`` (``cuda:0``... where a GPU is given). The figure is the
``multi_device`` scenario of ``spacegraph report``.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
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


def result(backends: Sequence[str], losses: Sequence[str] = ("dqn", "impala"), replicas: Sequence[int] = (1, 2, 4),
           devices: Sequence[str] | None = None, batch: int = 64, hidden: Sequence[int] = (64, 64),
           seconds: float = 1.0, repeats: int = 3) -> dict[str, Any]:
    """`measure` in this process with its settings, the machine and the devices recorded.

    Args:
        devices: the devices the replicas cycle over (e.g. ``["cuda:0"]``); None: TF logical CPUs
            ``/cpu:0``-``/cpu:3`` (made before TensorFlow starts) and PyTorch ``cpu``.

    Raises:
        ValueError: naming the argument for an unknown backend or loss, no replica count, or a batch smaller
            than the largest replica count.
    """
    bad = [b for b in backends if b not in ("tf", "torch")]
    if bad or not backends:
        raise ValueError(f"multi_device: backends: expected some of tf, torch; got {list(backends)!r}")
    if not losses or any(s not in ("dqn", "impala") for s in losses):
        raise ValueError(f"multi_device: losses: expected some of dqn, impala; got {list(losses)!r}")
    if not replicas or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in replicas):
        raise ValueError(f"multi_device: replicas: expected positive ints; got {list(replicas)!r}")
    if batch < max(replicas):
        raise ValueError(f"multi_device: batch {batch} must be at least the largest replica count {max(replicas)}")
    given = list(devices) if devices else None
    placed: dict[str, list[str]] = {}
    if "tf" in backends:
        from harness.backends.tf.devices import logical_cpus

        placed["tf"] = given or logical_cpus(4)
    if "torch" in backends:
        placed["torch"] = given or ["cpu"]
    load_start = list(os.getloadavg())
    rows = measure(backends, losses, replicas, placed, batch, hidden, seconds, repeats)
    real = bool(given) and any(d.startswith(("cuda", "/gpu", "gpu")) for d in given)
    return {"commit": _commit(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine_name": platform.node(), "machine": {**_machine(backends), "load_average": load_start},
            "batch": batch, "hidden": list(hidden), "seconds": seconds, "repeats": repeats, "devices": placed,
            "rows": rows, "load_average_end": list(os.getloadavg()),
            "tensorflow_imported": "tensorflow" in sys.modules,
            "note": ("Devices given: " + ", ".join(given) + ". Replicas beyond the number of devices share one. "
                     if real else "") + NOTE_LOGICAL}


def result_isolated(timeout: float = 1800.0, **kwargs: Any) -> dict[str, Any]:
    """`result` in a fresh interpreter (TensorFlow's logical CPUs need a runtime not started yet; a PyTorch-only
    run never imports TensorFlow), with ``kwargs`` passed as JSON.

    Raises:
        RuntimeError: with the child's output tail when it fails; ValueError: for bad arguments (as `result`).
    """
    with tempfile.TemporaryDirectory(prefix="multi_device_") as tmp:
        out = os.path.join(tmp, "result.json")
        done = subprocess.run([sys.executable, "-m", "spacegraph.reports.multi_device", json.dumps(kwargs), out],
                              capture_output=True, text=True, timeout=timeout)
        if done.returncode == 2:
            raise ValueError(done.stderr.strip().splitlines()[-1])
        if done.returncode != 0 or not os.path.exists(out):
            raise RuntimeError(f"multi_device child failed (status {done.returncode}): {done.stderr[-1500:]}")
        with open(out) as fh:
            return json.load(fh)


def child_main(argv: Sequence[str]) -> int:
    """The child of `result_isolated`: ``KWARGS_JSON OUT_PATH``; status 2 and one line for bad arguments."""
    kwargs = json.loads(argv[0])
    try:
        measured = result(**kwargs)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    with open(argv[1], "w") as fh:
        json.dump(measured, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
