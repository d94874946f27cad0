"""Frame replay vs RLlib measured (issue 13): filling the stores, interleaved rounds, bytes, subprocess sections.

Operations, timed in interleaved rounds (every contender's insert and sample in turn, the order
reversed every other round; median and range over rounds, on process CPU time and wall clock):

* ``insert``: add the next ``insert_batch`` records of the rollout (ours: ``store.add(records)``;
  RLlib: build the ``SampleBatch``, compress it when compressing, ``buffer.add``);
* ``sample``: 32 prioritized transitions with states and next states as ``uint8[32,84,84,4]`` arrays, as each
  store returns them (ours: ``store.sample(32)``, views of a channel-first gather; RLlib:
  ``buffer.sample(32, beta=0.4)``, which decompresses ``obs`` / ``new_obs`` itself into contiguous rows);
* ``sample_contiguous``: the same with both arrays C-contiguous NHWC (ours: ``store.sample(32, layout="nhwc")``,
  the store's own contiguous path; RLlib: its sample, already contiguous).

Bytes per transition: what the store accounts (ours ``nbytes()``, RLlib its ``est_size_bytes``)
and the growth of the process's resident memory while filling, divided by the transitions held.

Optional sections, each in fresh subprocesses (`frame_replay_process`): the peak resident memory
of a whole ``dqn_pong`` DQN process whose replay holds 1M transitions (`full_process`), and
``build_agent("dqn_pong")`` times (`build_times`).
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from harness.measure.machine import REPO, environment  # noqa: E402
from harness.measure.timing import interleaved_rates  # noqa: E402
from spacegraph.reports.frame_replay_contenders import (  # noqa: E402
    ALPHA, BETA, ENV_ID, RLLIB_MODULES, SAMPLE_BATCH, TITLES, RecordStream, available_bytes, make_contender,
    pong_rollout, rss_bytes, sample_contiguous)
from spacegraph.reports.rllib import rllib_missing  # noqa: E402

#: issue 13's targets
TARGETS = {"bytes_1m": 7.5e9, "bytes_1m_lz4": 2.0e9, "sample_per_s": 2000.0, "sample_per_s_lz4": 300.0,
           "build_s": 3.0, "peak_margin": 1.5e9}


# ---- filling and checking -----------------------------------------------------------------------------
def fill(contender: Any, stream: RecordStream, count: int, batch: int) -> dict[str, float]:
    """Inserts ``count`` records in batches; returns the time and the growth of resident memory."""
    gc.collect()
    rss0, t0, c0 = rss_bytes(), time.perf_counter(), time.process_time()
    done = 0
    while done < count:
        chunk = stream.next(min(batch, count - done))
        contender.insert(chunk)
        done += len(chunk["actions"])
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    gc.collect()
    return {"records": done, "wall_s": wall, "cpu_s": cpu, "rss_growth": rss_bytes() - rss0}


def check_sample(contender: Any) -> None:
    """The sample is what the report says it is: two uint8 [32, 84, 84, 4] arrays."""
    for arr in (*contender.sample(), *sample_contiguous(contender)):
        arr = np.asarray(arr)
        if arr.dtype != np.uint8 or arr.shape != (SAMPLE_BATCH, 84, 84, 4):
            raise RuntimeError(f"sample gave {arr.dtype}{list(arr.shape)}, not uint8[{SAMPLE_BATCH}, 84, 84, 4]")


def _stats(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


# ---- subprocess sections ------------------------------------------------------------------------------
def _child(args: list[str], timeout: float) -> dict[str, Any]:
    env = dict(os.environ, OMP_NUM_THREADS="1", TF_NUM_INTRAOP_THREADS="1", TF_NUM_INTEROP_THREADS="1",
               TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-m", "spacegraph.reports.frame_replay_process", *args], env=env,
                         cwd=REPO, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"frame_replay_process {' '.join(args)} failed ({out.returncode}): "
                           f"{out.stderr.strip().splitlines()[-5:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def full_process(records: dict[str, np.ndarray], backends: tuple[str, ...], fill_count: int, updates: int,
                 compressions: tuple[str, ...] = ("none", "lz4"), config: str = "dqn_pong",
                 timeout: float = 3600) -> list[dict[str, Any]]:
    """Peak resident memory of a whole DQN process per (backend, compression), each in a fresh subprocess."""
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "records.npz")
        np.savez(path, **records)
        for compression in compressions:
            for backend in backends:
                run = _child(["peak", "--config", config, "--backend", backend, "--compression", compression,
                              "--records", path, "--fill", str(fill_count), "--updates", str(updates)], timeout)
                run["replay_plus_margin"] = run["replay_bytes"] + TARGETS["peak_margin"]
                run["peak_met"] = run["peak_rss"] <= run["replay_plus_margin"]
                runs.append(run)
    return runs


def build_times(backends: tuple[str, ...], runs: int, config: str = "dqn_pong",
                timeout: float = 600) -> dict[str, Any]:
    """``build_agent(config)`` in ``runs`` fresh processes per backend (interleaved): wall and CPU seconds."""
    out: dict[str, Any] = {b: [] for b in backends}
    for _ in range(runs):
        for backend in backends:
            out[backend].append(_child(["build", "--config", config, "--backend", backend], timeout))
    return {b: {"runs": rs, "wall_s": _stats([r["wall_s"] for r in rs]), "cpu_s": _stats([r["cpu_s"] for r in rs]),
                "load_average": [r["load_average_before"][0] for r in rs]} for b, rs in out.items()}


# ---- the measurement ------------------------------------------------------------------------------------
def measure(capacity: int = 100_000, num_envs: int = 4, steps: int = 1000, insert_batch: int = 32,
            seconds: float = 8.0, rounds: int = 8, rllib: bool = True, rllib_uncompressed: int = 20_000,
            full: bool = False, full_fill: int = 1_000_000, full_updates: int = 8,
            backends: tuple[str, ...] = ("torch", "tf"), build_runs: int = 0,
            records: dict[str, np.ndarray] | None = None,
            rllib_check: Callable[..., str | None] = rllib_missing) -> dict[str, Any]:
    """Everything the report shows, as a JSON-ready dict.

    Args:
        capacity: transitions each store holds (filled to it before timing).
        num_envs, steps: the Pong rollout (ignored when ``records`` is given).
        insert_batch: records per insert (in the fill and the timed inserts).
        seconds: time each operation of each contender gets in all, over ``rounds`` rounds.
        rllib: compare with RLlib when it is installed.
        rllib_uncompressed: the capacity of RLlib's buffer without compression (at most ``capacity``; it
            needs ~57 KB per transition; 0 leaves it out). Its rates hardly depend on the capacity.
        full: run the whole-process section (``full_fill`` transitions, ``full_updates`` updates, per backend and
            compression; minutes).
        backends: backends of the subprocess sections.
        build_runs: fresh processes per backend timing ``build_agent("dqn_pong")`` (0: skip).
        records: the records to use instead of a Pong rollout (tests).
        rllib_check: says why RLlib's ``RLLIB_MODULES`` do not import, None when they do (tests pass their own).
    """
    load0, t_start = os.getloadavg(), time.perf_counter()
    t0 = time.perf_counter()
    if records is None:
        records = pong_rollout(num_envs, steps)
    rollout_s = time.perf_counter() - t0
    n_records = len(records["actions"])
    result: dict[str, Any] = {
        "config": {"capacity": capacity, "num_envs": num_envs, "steps": steps, "records": n_records,
                   "insert_batch": insert_batch, "sample_batch": SAMPLE_BATCH, "seconds": seconds, "rounds": rounds,
                   "alpha": ALPHA, "beta": BETA, "env": ENV_ID, "n_step": 3, "gamma": 0.99,
                   "rollout_seconds": round(rollout_s, 1), "full_fill": full_fill if full else None,
                   "full_updates": full_updates if full else None, "build_runs": build_runs,
                   "backends": list(backends)},
        "targets": TARGETS, "contenders": {}, "rllib_note": None, "versions": {}, "skipped": {}}
    names = ["ours", "ours_lz4"]
    missing = rllib_check(*RLLIB_MODULES) if rllib else "RLlib left out (--no-rllib)"
    if missing is None:
        import ray

        result["versions"]["ray"] = ray.__version__
        names.append("rllib_lz4")
    else:
        result["rllib_note"] = missing
    import lz4

    result["versions"]["lz4"] = lz4.__version__
    contenders: dict[str, Any] = {}
    for name in list(names) + (["rllib"] if missing is None and rllib_uncompressed > 0 else []):
        cap = min(capacity, rllib_uncompressed) if name == "rllib" else capacity
        if name == "rllib" and 2 * 84 * 84 * 4 * 1.1 * cap > available_bytes() / 3:
            result["skipped"]["rllib"] = (f"uncompressed RLlib needs ~{2 * 84 * 84 * 4 * 1.1 * cap / 1e9:.1f} GB "
                                          f"at capacity {cap}; more than a third of the "
                                          f"{available_bytes() / 1e9:.1f} GB available")
            continue
        contender = make_contender(name, cap)
        stream = RecordStream(records)
        filled = fill(contender, stream, cap, insert_batch)
        check_sample(contender)
        size = contender.size()
        contenders[name] = (contender, stream)
        if name not in names:
            names.append(name)
        result["contenders"][name] = {
            "title": TITLES[name], "capacity": cap, "held": size, "fill_records": filled["records"],
            "fill_records_per_s": filled["records"] / filled["wall_s"],
            "fill_records_per_cpu_s": filled["records"] / max(filled["cpu_s"], 1e-9),
            "accounted_bytes": contender.accounted_bytes(),
            "accounted_bytes_per_transition": contender.accounted_bytes() / max(size, 1),
            "rss_growth": filled["rss_growth"], "rss_bytes_per_transition": filled["rss_growth"] / max(size, 1)}
        if name.startswith("ours"):
            ix = contender.store.index
            result["contenders"][name].update(frames_written=ix.frames_written,
                                              frame_bytes=contender.store.frame_nbytes(),
                                              frames_per_transition=ix.frames_written / max(ix.added, 1))
    fns: dict[str, Callable[[], Any]] = {}
    for name, (contender, stream) in contenders.items():
        fns[f"{name}/insert"] = (lambda c=contender, s=stream: c.insert(s.next(insert_batch)))
        fns[f"{name}/sample"] = contender.sample
        fns[f"{name}/sample_contiguous"] = (lambda c=contender: sample_contiguous(c))
    rates = interleaved_rates(fns, seconds, rounds, warmup=2)
    for name in contenders:
        row = result["contenders"][name]
        for op, scale, unit in (("insert", insert_batch, "records"), ("sample", 1, "batches"),
                                ("sample_contiguous", 1, "batches")):
            r = rates[f"{name}/{op}"]
            row[op] = {"unit": f"{unit}/s", "per_cpu_s": _stats([x * scale for x in r["cpu"]]),
                       "per_s": _stats([x * scale for x in r["wall"]]), "rounds_cpu": [x * scale for x in r["cpu"]]}
    del contenders, fns
    gc.collect()
    result["ratios"] = ratios(result)
    if full:
        result["full_process"] = full_process(records, backends, full_fill, full_updates)
    if build_runs:
        result["build"] = build_times(backends, build_runs)
    result["environment"] = environment(load0, time.perf_counter() - t_start)
    result["verdicts"] = verdicts(result)
    return result


def ratios(result: dict[str, Any]) -> dict[str, float | None]:
    """Ours / RLlib (compressed) per operation, on CPU-time medians: above 1 means ours is faster."""
    c = result["contenders"]
    out: dict[str, float | None] = {}
    for ours in ("ours", "ours_lz4"):
        for peer in ("rllib_lz4", "rllib"):
            for op in ("insert", "sample", "sample_contiguous"):
                key = f"{ours}/{peer} {op}"
                out[key] = (c[ours][op]["per_cpu_s"]["median"] / c[peer][op]["per_cpu_s"]["median"]
                            if ours in c and peer in c else None)
    return out


def verdicts(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Each of issue 13's targets: the figure, the target and met / missed / not measured."""
    c, out = result["contenders"], []

    def add(what: str, figure: float | None, target: str, met: bool | None, note: str = "") -> None:
        out.append({"target": what, "figure": figure, "wanted": target,
                    "status": "not measured" if met is None else "met" if met else "missed", "note": note})

    full = {(r["backend"], r["compression"]): r for r in result.get("full_process", [])}
    for comp, key, label in ((None, "bytes_1m", "1M Pong transitions, uncompressed"),
                             ("lz4", "bytes_1m_lz4", "1M Pong transitions, LZ4")):
        runs = [r for (b, cc), r in full.items() if cc == comp]
        if runs:
            fig = max(r["replay_bytes"] for r in runs)
            add(label, fig, f"<= {TARGETS[key] / 1e9:g} GB", fig <= TARGETS[key], "replay bytes at 1M (whole process)")
        else:
            name = "ours" if comp is None else "ours_lz4"
            fig = c[name]["accounted_bytes_per_transition"] * 1e6 if name in c else None
            add(label, fig, f"<= {TARGETS[key] / 1e9:g} GB", None if fig is None else fig <= TARGETS[key],
                f"extrapolated from capacity {result['config']['capacity']}")
    for name, key in (("ours", "sample_per_s"), ("ours_lz4", "sample_per_s_lz4")):
        for op, how in (("sample", "as returned"), ("sample_contiguous", "made C-contiguous NHWC")):
            fig = c[name][op]["per_cpu_s"]["median"] if name in c else None
            add(f"sample 32 stacked transitions ({how}), {TITLES[name]}", fig,
                f">= {TARGETS[key]:g} batches per CPU-s", None if fig is None else fig >= TARGETS[key])
            ratio = result["ratios"].get(f"{name}/rllib_lz4 {op}")
            add(f"sample ({how}), {TITLES[name]} / RLlib (compressed)", ratio, "> 1",
                None if ratio is None else ratio > 1)
    for b, info in result.get("build", {}).items():
        fig = info["wall_s"]["median"]
        add(f"build_agent('dqn_pong'), {b}", fig, f"< {TARGETS['build_s']:g} s (wall)", fig < TARGETS["build_s"],
            f"CPU {info['cpu_s']['median']:.2f} s; load {info['load_average']}")
    for r in result.get("full_process", []):
        add(f"peak RSS, dqn_pong {r['backend']}, {r['compression'] or 'uncompressed'}", r["peak_rss"],
            f"<= replay + 1.5 GB = {r['replay_plus_margin'] / 1e9:.2f} GB", r["peak_met"])
    return out
