"""Multi-device report: synchronous updates/s and samples/s against replicas, towers and processes side by side.

For one backend per run (a fresh interpreter, `result_isolated`) and each loss (the DQN and the IMPALA learner of
`multi_device_graphs`, on the Nature CNN by default) it times the update method of:

- ``single``: the plain graph (no strategy), one update of ``batch`` rows;
- ``towers N``: `SyncReplicas` with N towers in this process, run concurrently
  (`harness.execution.strategies.concurrent_towers`);
- ``processes N`` (N >= 2): `ProcessReplicas`, replica 0 in this process and N - 1 replica processes, gradients
  all-reduced (``execution.strategy: {type: sync-replicas, replicas: N, mode: processes}``).

The per-replica batch is fixed: a replicated update takes N x ``batch`` rows (IMPALA: N x ``rollouts`` rollouts
of 5 steps), so **updates/s counts synchronous updates, each of N x batch rows** (N x rollouts x 5 steps), and
samples/s = updates/s x N x batch (N x rollouts x 5). One framework thread per replica: this process runs
with one intra-op thread (PyTorch and TensorFlow) and ``tf_inter_op`` inter-op threads (1, except for TF
towers, whose concurrency is the inter-op pool); each replica process runs with one thread (pinned to its own
core when there are enough).
The settings are built, warmed up, then timed in ``repeats`` interleaved rounds of at least ``seconds`` each;
each figure is the median of its rounds, so a ratio such as processes 2 / single is taken in one run.

The figure is the ``multi_device`` scenario of ``spacegraph report`` (with the Ape-X time to target of
`multi_device_apex`).
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

#: What a row's ``mode`` may be.
MODES = ("single", "towers", "processes")
#: Rollout length of the IMPALA learner's batches (`multi_device_graphs.impala_batch`).
ROLLOUT = 5
#: The result's format (2: towers and processes; results without ``format`` are the earlier logical-device runs).
FORMAT = 2


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, timeout=10).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "") if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _machine(backend: str) -> dict[str, Any]:
    info: dict[str, Any] = {"python": platform.python_version(), "platform": platform.platform(),
                            "cpus": os.cpu_count(), "load_average": list(os.getloadavg())}
    import torch  # processes mode needs it on both backends

    info["torch"] = torch.__version__
    info["cuda"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    if backend == "tf":
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


def settings(modes: Sequence[str], replicas: Sequence[int]) -> list[tuple[str, int]]:
    """``(mode, replicas)`` of every setting: ``single`` first, then towers at each count, processes at each >= 2."""
    out = [("single", 1)]
    out += [("towers", n) for n in replicas if "towers" in modes]
    out += [("processes", n) for n in replicas if "processes" in modes and n >= 2]
    return out


def make_executor(backend: str, loss: str, network: str, mode: str, count: int,
                  devices: Sequence[str] | None = None, hidden: Sequence[int] = (64, 64)) -> Any:
    """The executor of one setting (``devices``: cycled over the replicas; None: the backend's default device)."""
    from harness.execution.strategies import SyncReplicas, make_strategy
    from spacegraph.reports import multi_device_graphs as mdg

    method, reduction = mdg.UPDATES[loss]
    placed = [devices[i % len(devices)] for i in range(count)] if devices else None
    strategy = None
    if mode == "towers":
        default = "cpu" if backend == "torch" else "/cpu:0"
        strategy = SyncReplicas(placed or [default] * count, [method], reduction=reduction, concurrent=True)
    elif mode == "processes":
        spec: dict[str, Any] = {"type": "sync-replicas", "replicas": count, "mode": "processes"}
        if placed:
            spec["devices"] = placed
        strategy = make_strategy({"strategy": spec}, [method], reduction=reduction)
    return mdg.build(loss, backend, None, hidden=hidden, strategy=strategy, network=network)


def _close(executor: Any) -> None:
    close = getattr(executor, "close", None)
    if callable(close):
        close()


def measure(backend: str, losses: Sequence[str], modes: Sequence[str], replicas: Sequence[int], network: str,
            batch: int, rollouts: int, seconds: float, repeats: int, devices: Sequence[str] | None = None,
            warmup: int = 3) -> list[dict[str, Any]]:
    """One row per loss and setting (`settings`), timed in interleaved rounds (see the module docstring)."""
    from spacegraph.reports import multi_device_graphs as mdg

    rows = []
    for loss in losses:
        method = mdg.UPDATES[loss][0]
        per = rollouts if loss == "impala" else batch
        built = []  # (mode, count, executor, args, rates)
        try:
            for mode, count in settings(modes, replicas):
                executor = make_executor(backend, loss, network, mode, count, devices)
                built.append((mode, count, executor, mdg.batch(loss, per * count, network=network), []))
                for _ in range(warmup):
                    executor.execute(method, *built[-1][3])
            for _ in range(repeats):
                for _, _, executor, args, rates in built:
                    rates.append(time_updates(executor, method, args, seconds))
        finally:
            for _, _, executor, _, _ in built:
                _close(executor)
        for mode, count, executor, _, rates in built:
            rate = statistics.median(rates)
            samples = per * count * (ROLLOUT if loss == "impala" else 1)
            describe = getattr(executor.strategy, "describe", None)
            rows.append({"backend": backend, "loss": loss, "network": network, "mode": mode, "replicas": count,
                         "setting": "single" if mode == "single" else f"{mode} {count}",
                         "per_replica_batch": per, "rows_per_update": per * count,
                         "samples_per_update": samples, "updates_per_s": rate, "samples_per_s": rate * samples,
                         "rounds": rates, "strategy": describe() if callable(describe) else None})
            print(f"{backend:5s} {loss:6s} {rows[-1]['setting']:12s} {rate:8.2f} updates/s "
                  f"{rate * samples:9.0f} samples/s", flush=True)
    return rows


def over_single(rows: Sequence[dict[str, Any]], loss: str, setting: str) -> float:
    """Samples/s of ``setting`` (e.g. ``"processes 2"``) over the same run's ``single`` for ``loss``.

    Raises:
        KeyError: naming the loss and setting when the rows lack either.
    """
    rates = {r["setting"]: r["samples_per_s"] for r in rows if r["loss"] == loss}
    if setting not in rates or "single" not in rates:
        raise KeyError(f"multi_device: no {loss!r} rows for {setting!r} and 'single'; got {sorted(rates)}")
    return rates[setting] / rates["single"]


def _check(backend: str, losses: Sequence[str], modes: Sequence[str], replicas: Sequence[int], network: str,
           batch: int, rollouts: int, seconds: float, repeats: int, tf_inter_op: int) -> None:
    from spacegraph.reports.multi_device_graphs import NETWORKS

    if backend not in ("tf", "torch"):
        raise ValueError(f"multi_device: backend: expected tf or torch; got {backend!r}")
    if not losses or any(s not in ("dqn", "impala") for s in losses):
        raise ValueError(f"multi_device: losses: expected some of dqn, impala; got {list(losses)!r}")
    if not modes or any(m not in MODES[1:] for m in modes):
        raise ValueError(f"multi_device: modes: expected some of towers, processes; got {list(modes)!r}")
    if not replicas or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in replicas):
        raise ValueError(f"multi_device: replicas: expected positive ints; got {list(replicas)!r}")
    if network not in NETWORKS:
        raise ValueError(f"multi_device: network: expected one of {', '.join(NETWORKS)}; got {network!r}")
    for name, value in (("batch", batch), ("rollouts", rollouts), ("repeats", repeats), ("tf_inter_op", tf_inter_op)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"multi_device: {name}: expected a positive int; got {value!r}")
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0:
        raise ValueError(f"multi_device: seconds: expected a positive number; got {seconds!r}")


def result(backend: str, losses: Sequence[str] = ("dqn", "impala"), modes: Sequence[str] = ("towers", "processes"),
           replicas: Sequence[int] = (1, 2, 4), network: str = "nature", batch: int = 32, rollouts: int = 8,
           seconds: float = 2.0, repeats: int = 3, tf_inter_op: int = 1,
           devices: Sequence[str] | None = None) -> dict[str, Any]:
    """`measure` in this process, with one intra-op thread and ``tf_inter_op`` TF inter-op threads (set before the
    framework starts), the settings, the machine and the load recorded.

    Args:
        backend: ``tf`` or ``torch`` (processes mode needs PyTorch on both).
        losses: some of ``dqn``, ``impala``.
        modes: some of ``towers``, ``processes`` (``single`` is always measured).
        replicas: the replica counts.
        network: ``nature`` (the Nature DQN CNN on 84x84x4 frames) or ``mlp`` (two dense layers of 64).
        batch: DQN rows per replica.
        rollouts: IMPALA rollouts (of 5 steps) per replica.
        seconds, repeats: each round's minimum length and the number of interleaved rounds.
        tf_inter_op: TensorFlow's inter-op threads (towers run concurrently with 2 or more).
        devices: the devices the replicas cycle over (None: the backend's default device).

    Raises:
        ValueError: naming the argument, what was expected and what came.
    """
    _check(backend, losses, modes, replicas, network, batch, rollouts, seconds, repeats, tf_inter_op)
    from harness.backends import get_threads, set_threads

    set_threads("torch", 1)
    if backend == "tf":
        set_threads("tf", 1, inter_op=False)
        import tensorflow as tf

        try:
            tf.config.threading.set_inter_op_parallelism_threads(tf_inter_op)
        except RuntimeError:  # TF's runtime started already in this process: its pools stay (``threads`` says so)
            pass
    load_start = list(os.getloadavg())
    rows = measure(backend, losses, modes, replicas, network, batch, rollouts, seconds, repeats, devices)
    return {"format": FORMAT, "commit": _commit(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine_name": platform.node(), "machine": {**_machine(backend), "load_average": load_start},
            "backend": backend, "network": network, "batch": batch, "rollouts": rollouts, "seconds": seconds,
            "repeats": repeats, "devices": list(devices) if devices else None,
            "threads": {"torch": get_threads("torch"), **({"tf": get_threads("tf")} if backend == "tf" else {})},
            "rows": rows, "load_average_end": list(os.getloadavg()),
            "tensorflow_imported": "tensorflow" in sys.modules}


def result_isolated(timeout: float = 1800.0, **kwargs: Any) -> dict[str, Any]:
    """`result` in a fresh interpreter (thread pools set before the framework starts; a PyTorch run never imports
    TensorFlow), with ``kwargs`` passed as JSON.

    Raises:
        RuntimeError: with the child's output tail when it fails; ValueError: for bad arguments (as `result`).
    """
    with tempfile.TemporaryDirectory(prefix="multi_device_") as tmp:
        out = os.path.join(tmp, "result.json")
        env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        done = subprocess.run([sys.executable, "-m", "spacegraph.reports.multi_device", json.dumps(kwargs), out],
                              capture_output=True, text=True, timeout=timeout, env=env)
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
