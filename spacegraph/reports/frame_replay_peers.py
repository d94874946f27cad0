"""Replay at Atari scale: our host frame replay (uncompressed and LZ4) beside RLlib's replay buffer, on Pong.

All in one process, on the same data: n-step records (3-step, gamma 0.99, as ``dqn_pong`` folds
them) of real ``ALE/Pong-v5`` frames (``reference_agents.environments.make_env(..., atari=True)``:
gray 84x84, 4 stacked, ``uint8[84,84,4]``) from several environments stepped in lockstep with
random actions; the rollout is recycled (taken again from its start) to fill every store to
``capacity``, in insert batches of ``insert_batch`` records in the worker's order.

Contenders (each prioritized, alpha 0.6, beta 0.4, as ``dqn_pong``):

* ``ours`` / ``ours_lz4``: `HostFrameReplay` (each frame stored once; LZ4 per frame or not);
* ``rllib_lz4``: RLlib's ``PrioritizedReplayBuffer`` (``storage_unit="timesteps"``) fed
  ``SampleBatch``es compressed as RLlib's ``compress_observations=True`` compresses them
  (``SampleBatch.compress(bulk=False)``: each ``obs`` / ``new_obs`` stack LZ4-packed on its own);
* ``rllib``: the same buffer without compression (only where the memory it needs fits).

Operations, timed in interleaved rounds (every contender's insert and sample in turn, the order
reversed every other round; median and range over rounds, on process CPU time and wall clock):

* ``insert``: add the next ``insert_batch`` records of the rollout (ours: ``store.add(records)``;
  RLlib: build the ``SampleBatch``, compress it when compressing, ``buffer.add``);
* ``sample``: 32 prioritized transitions with states and next states materialised as contiguous
  ``uint8[32,84,84,4]`` arrays (ours: ``store.sample(32)`` and ``np.ascontiguousarray`` of both;
  RLlib: ``buffer.sample(32, beta=0.4)``, which decompresses ``obs`` / ``new_obs`` itself).

Bytes per transition: what the store accounts (ours ``nbytes()``, RLlib its ``est_size_bytes``)
and the growth of the process's resident memory while filling, divided by the transitions held.

Optional sections, each in fresh subprocesses (`frame_replay_process`): the peak resident memory
of a whole ``dqn_pong`` DQN process whose replay holds 1M transitions (``--full-process``), and
``build_agent("dqn_pong")`` times (``--build-runs``).

Run ``python -m spacegraph.reports.frame_replay_peers [--capacity N] [--full-process]``; it writes
``reports/frame_replay_vs_rllib.md``, ``.png`` and ``.json``. Without RLlib it measures ours only
and says so.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from harness.measure.machine import REPO, environment  # noqa: E402
from harness.measure.tables import markdown_table  # noqa: E402
from harness.measure.timing import interleaved_rates  # noqa: E402
from spacegraph.reports.rllib import rllib_missing  # noqa: E402

REPORT_DIR = REPO / "reports"
STEM = "frame_replay_vs_rllib"
ENV_ID = "ALE/Pong-v5"
ALPHA, BETA = 0.6, 0.4
SAMPLE_BATCH = 32
RLLIB_MODULES = ("ray.rllib.policy.sample_batch", "ray.rllib.utils.replay_buffers.prioritized_replay_buffer")
TITLES = {"ours": "ours, HostFrameReplay", "ours_lz4": "ours, HostFrameReplay + LZ4",
          "rllib_lz4": "RLlib PrioritizedReplayBuffer, compress_observations", "rllib": "RLlib PrioritizedReplayBuffer"}
#: issue 13's targets
TARGETS = {"bytes_1m": 7.5e9, "bytes_1m_lz4": 2.0e9, "sample_per_s": 2000.0, "sample_per_s_lz4": 300.0,
           "build_s": 3.0, "peak_margin": 1.5e9}


# ---- data ------------------------------------------------------------------------------------------
def pong_rollout(num_envs: int = 4, steps: int = 1000, n_step: int = 3, gamma: float = 0.99, seed: int = 0,
                 env_id: str = ENV_ID) -> dict[str, np.ndarray]:
    """n-step records of ``num_envs`` Pong environments stepped in lockstep ``steps`` times with random actions.

    Records come out in the order a `VectorEnvWorker` hands them to replay (all environments' finished
    windows after each lockstep step), as one batch of `RECORD_FIELDS` arrays.
    """
    from reference_agents.components.helpers import NStepAccumulator
    from reference_agents.environments import make_env
    from reference_agents.oracles.frame_replay import stack_records

    rng = np.random.default_rng(seed)
    envs = [make_env(env_id, atari=True) for _ in range(num_envs)]
    accs = [NStepAccumulator(n_step, gamma) for _ in range(num_envs)]
    obs = [env.reset(seed=seed + e)[0] for e, env in enumerate(envs)]
    n_actions = int(envs[0].action_space.n)
    rows: list[dict[str, Any]] = []
    for _ in range(steps):
        for e, env in enumerate(envs):
            action = int(rng.integers(0, n_actions))
            nxt, reward, term, trunc, _ = env.step(action)
            rows += accs[e].push(obs[e], action, float(reward), nxt, bool(term), bool(trunc))
            obs[e] = env.reset()[0] if term or trunc else nxt
    for env in envs:
        env.close()
    return stack_records(rows)


class RecordStream:
    """The rollout's records in consecutive chunks, starting again from the top at its end (recycled).

    Each chunk is a copy, as an environment hands over new arrays (a store that keeps what it is given,
    as RLlib's keeps its ``SampleBatch`` columns, then holds memory of its own, not views of the rollout).
    """

    def __init__(self, records: dict[str, np.ndarray], start: int = 0) -> None:
        self.records, self.n, self.pos = records, len(records["actions"]), start % len(records["actions"])

    def next(self, count: int) -> dict[str, np.ndarray]:
        take = min(count, self.n - self.pos)
        out = {k: v[self.pos:self.pos + take].copy() for k, v in self.records.items()}
        self.pos = (self.pos + take) % self.n
        return out


def rss_bytes() -> int:
    """This process's resident set now (``/proc/self/statm``)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def available_bytes() -> int:
    """``MemAvailable`` from ``/proc/meminfo`` (bytes)."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


# ---- contenders --------------------------------------------------------------------------------------
class Ours:
    """`HostFrameReplay` as ``dqn_pong`` builds it (prioritized), LZ4 or not."""

    def __init__(self, capacity: int, compression: str | None, seed: int = 0) -> None:
        from reference_agents.components.memories import HostFrameReplay

        self.store = HostFrameReplay(capacity, (84, 84), 4, prioritized=True, alpha=ALPHA, beta=BETA,
                                     compression=compression, seed=seed)

    def insert(self, records: dict[str, np.ndarray]) -> None:
        self.store.add(records)

    def sample(self) -> tuple[np.ndarray, np.ndarray]:
        """States and next states as the store returns them: ``uint8[32,84,84,4]`` views of one gathered
        ``[64,4,84,84]`` array (frames stay channel-first in memory)."""
        records, _, _ = self.store.sample(SAMPLE_BATCH)
        return records["states"], records["next_states"]

    def size(self) -> int:
        return self.store.size

    def accounted_bytes(self) -> int:
        return self.store.nbytes()


class RLlibBuffer:
    """RLlib's ``PrioritizedReplayBuffer`` fed ``SampleBatch``es, compressed as ``compress_observations`` does."""

    def __init__(self, capacity: int, compress: bool, seed: int = 0) -> None:
        import random

        from ray.rllib.policy.sample_batch import SampleBatch
        from ray.rllib.utils.replay_buffers.prioritized_replay_buffer import PrioritizedReplayBuffer

        random.seed(seed)  # RLlib draws its masses with the random module
        self.cls, self.compress = SampleBatch, compress
        self.buffer = PrioritizedReplayBuffer(capacity=capacity, storage_unit="timesteps", alpha=ALPHA)

    def insert(self, records: dict[str, np.ndarray]) -> None:
        n = len(records["actions"])
        batch = self.cls({"obs": records["states"], "actions": records["actions"], "rewards": records["rewards"],
                          "terminateds": records["terminals"], "truncateds": np.zeros(n, bool),
                          "new_obs": records["next_states"]})
        if self.compress:
            batch.compress(bulk=False)  # what RolloutWorker does with compress_observations=True
        self.buffer.add(batch)

    def sample(self) -> tuple[np.ndarray, np.ndarray]:
        batch = self.buffer.sample(SAMPLE_BATCH, beta=BETA)  # decompresses obs / new_obs itself
        return batch["obs"], batch["new_obs"]  # contiguous uint8[32,84,84,4] (concatenated rows)

    def size(self) -> int:
        return len(self.buffer)

    def accounted_bytes(self) -> int:
        return int(self.buffer.stats()["est_size_bytes"])


def sample_contiguous(contender: Any) -> tuple[np.ndarray, np.ndarray]:
    """A sample with both arrays C-contiguous ``uint8[32,84,84,4]`` (a copy only where they are not)."""
    states, next_states = contender.sample()
    return np.ascontiguousarray(states), np.ascontiguousarray(next_states)


def make_contender(name: str, capacity: int) -> Any:
    return {"ours": lambda: Ours(capacity, None), "ours_lz4": lambda: Ours(capacity, "lz4"),
            "rllib_lz4": lambda: RLlibBuffer(capacity, True), "rllib": lambda: RLlibBuffer(capacity, False)}[name]()


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
            records: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
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
    missing = rllib_missing(*RLLIB_MODULES) if rllib else "RLlib left out (--no-rllib)"
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


def redo_subprocesses(result: dict[str, Any], full: bool, full_fill: int, backends: tuple[str, ...],
                      build_runs: int) -> dict[str, Any]:
    """``result`` with its subprocess sections measured again (the rollout re-made from its config)."""
    cfg = result["config"]
    load0, t0 = os.getloadavg(), time.perf_counter()
    if full:
        records = pong_rollout(cfg["num_envs"], cfg["steps"])
        result["full_process"] = full_process(records, backends, full_fill, cfg.get("full_updates") or 8)
        cfg.update(full_fill=full_fill, full_updates=cfg.get("full_updates") or 8)
    if build_runs:
        result["build"] = build_times(backends, build_runs)
        cfg["build_runs"] = build_runs
    cfg["backends"] = list(backends)
    env = environment(load0, time.perf_counter() - t0)
    result["environment"]["subprocess_sections"] = {
        "redone": [s for s, on in (("full_process", full), ("build", bool(build_runs))) if on],
        "date": env["date"], "git_revision": env["git_revision"], "load_average_before": env["load_average_before"],
        "load_average_after": env["load_average_after"], "measurement_seconds": env["measurement_seconds"]}
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


# ---- writing --------------------------------------------------------------------------------------------
def _gb(x: float | None) -> str:
    return "n/a" if x is None else f"{x / 1e9:.2f} GB"


def _rate(s: dict[str, float]) -> str:
    return f"{s['median']:,.0f} ({s['min']:,.0f}–{s['max']:,.0f})"


def rates_table(result: dict[str, Any]) -> str:
    rows = []
    for name, c in result["contenders"].items():
        rows.append([c["title"], f"{c['capacity']:,}", _rate(c["insert"]["per_cpu_s"]), _rate(c["insert"]["per_s"]),
                     _rate(c["sample"]["per_cpu_s"]), _rate(c["sample"]["per_s"]),
                     _rate(c["sample_contiguous"]["per_cpu_s"]), _rate(c["sample_contiguous"]["per_s"])])
    return markdown_table(["contender", "capacity", "insert records/CPU-s", "insert records/s (wall)",
                           "sample batches/CPU-s", "sample batches/s (wall)",
                           "sample + contiguous batches/CPU-s", "sample + contiguous batches/s (wall)"], rows)


def bytes_table(result: dict[str, Any]) -> str:
    rows = []
    for name, c in result["contenders"].items():
        rows.append([c["title"], f"{c['held']:,}", f"{c['accounted_bytes_per_transition']:,.0f}",
                     f"{c['rss_bytes_per_transition']:,.0f}", _gb(c["accounted_bytes_per_transition"] * 1e6),
                     _gb(c["rss_bytes_per_transition"] * 1e6),
                     f"{c['fill_records_per_cpu_s']:,.0f}"])
    return markdown_table(["contender", "held", "accounted B/transition", "RSS growth B/transition",
                           "1M accounted", "1M by RSS growth", "fill records/CPU-s"], rows)


def full_table(result: dict[str, Any]) -> str:
    rows = [[r["backend"], r["compression"] or "none", f"{r['valid']:,}", _gb(r["replay_bytes"]),
             _gb(r["peak_rss"]), _gb(r["replay_plus_margin"]), "met" if r["peak_met"] else "**missed**",
             _gb(r["peak_rss"] - r["replay_bytes"]), f"{r['build_s']:.1f}", f"{r['fill_s']:.0f} ({r['fill_cpu_s']:.0f})",
             f"{r['update_s'] / max(r['updates'], 1) * 1e3:.0f}"]
            for r in result.get("full_process", [])]
    return markdown_table(["backend", "compression", "transitions held", "replay bytes", "peak RSS",
                           "replay + 1.5 GB", "peak <= replay + 1.5 GB", "peak - replay", "build s",
                           "fill s wall (CPU)", "ms per update"], rows)


def build_table(result: dict[str, Any]) -> str:
    rows = [[b, _fmt_s(i["wall_s"]), _fmt_s(i["cpu_s"]), ", ".join(f"{x:.1f}" for x in i["load_average"])]
            for b, i in result.get("build", {}).items()]
    return markdown_table(["backend", "wall s, median (range)", "CPU s, median (range)", "1-min load per run"], rows)


def _fmt_s(s: dict[str, float]) -> str:
    return f"{s['median']:.2f} ({s['min']:.2f}–{s['max']:.2f})"


def verdict_table(result: dict[str, Any]) -> str:
    rows = []
    for v in result["verdicts"]:
        fig = v["figure"]
        text = "n/a" if fig is None else (_gb(fig) if fig > 1e6 else f"{fig:,.2f}" if fig < 100 else f"{fig:,.0f}")
        rows.append([v["target"], v["wanted"], text, v["status"] if v["status"] != "missed" else "**missed**",
                     v["note"]])
    return markdown_table(["target", "wanted", "measured", "status", "note"], rows)


def markdown(result: dict[str, Any]) -> str:
    cfg, env = result["config"], result["environment"]
    ver = result["versions"]
    parts = [
        "# Replay at Atari scale: frame replay vs RLlib's replay buffer (issue 13)",
        "",
        f"`{cfg['env']}` records (3-step, gamma 0.99) of {cfg['num_envs']} environments stepped in lockstep "
        f"{cfg['steps']} times with random actions ({cfg['records']:,} records, frames `uint8[84,84,4]` as "
        f"`make_env(..., atari=True)` gives them), recycled to fill every store to **{cfg['capacity']:,}** "
        f"transitions in inserts of {cfg['insert_batch']}; prioritized (alpha {cfg['alpha']}, beta {cfg['beta']}) "
        "everywhere. One process, interleaved rounds.",
        "",
        "## Targets",
        "",
        verdict_table(result),
        "",
        "## Insert and sample rates",
        "",
        f"Median over {cfg['rounds']} interleaved rounds (range in brackets), {cfg['seconds']:g} s per operation "
        "and contender in all. Per CPU-second of this process (what one dedicated core does; other processes "
        "on this shared machine do not lower it) and per wall-clock second. A sample is 32 prioritized "
        "transitions with states and next states as `uint8[32,84,84,4]` NumPy arrays holding every byte: "
        "**sample** takes them as each store returns them (RLlib: C-contiguous rows, decompressed; ours: "
        "`[32,84,84,4]` views of one gathered `[64,4,84,84]` array, i.e. frames channel-first in memory, the "
        "layout PyTorch's NCHW convolutions take without a copy); **sample + contiguous** also copies both "
        "into C-contiguous NHWC (`np.ascontiguousarray`, a no-op for RLlib's), as a consumer that wants "
        "NHWC bytes (TensorFlow's conversion of a strided array) pays.",
        "",
        rates_table(result),
        "",
        "Ours / RLlib (compressed observations) on the CPU-time medians (above 1: ours faster):",
        "",
        *[f"- {k}: {v:.2f}" for k, v in result["ratios"].items() if v is not None],
        *([f"- RLlib not measured: {result['rllib_note']}"] if result["rllib_note"] else []),
        *[f"- `{k}` not measured: {v}" for k, v in result["skipped"].items()],
        "",
        f"![rates and bytes]({STEM}.png)",
        "",
        "## Bytes per transition",
        "",
        "Accounted: ours `HostFrameReplay.nbytes()` (frames or LZ4 blobs with their 33-byte `bytes` headers and "
        "pointers, chains, transitions, segment trees); RLlib its own `stats()['est_size_bytes']` (the "
        "`SampleBatch.size_bytes()` of what it holds). RSS growth: the process's resident memory after the "
        "fill minus before it (after `gc.collect()`), per transition held: what the machine pays, Python "
        "objects included. The 1M columns multiply by 1M.",
        "",
        bytes_table(result),
        "",
    ]
    if result.get("full_process"):
        parts += [
            "## A whole Pong DQN process with a full replay",
            "",
            f"Each row a fresh process (`python -m spacegraph.reports.frame_replay_process peak`): "
            f"`build_agent('dqn_pong', backend=...)` (host frame replay, 1M capacity; `memory.compression` set), "
            f"the replay filled with {cfg['full_fill']:,} transitions recycled from the rollout above (batched "
            f"`HostFrameReplay.add` of 1,024), then {cfg['full_updates']} `agent.update()` calls (sample 32, "
            "learn, write priorities). Peak RSS is the child's `VmHWM` (`/proc/self/status`: the high-water mark "
            "of its own resident memory), not `ru_maxrss`, which Linux carries over from the parent that spawned "
            "the child (this report's process, holding several GB of stores) and so read the parent's size; "
            "replay bytes `HostFrameReplay.nbytes()`. The target: peak <= replay bytes + 1.5 GB.",
            "",
            full_table(result),
            "",
        ]
    if result.get("build"):
        parts += [
            "## `build_agent(\"dqn_pong\")`",
            "",
            f"{cfg['build_runs']} fresh processes per backend, interleaved; the backend and `reference_agents` "
            "are imported before the clock starts, so this is `build_agent` alone (config, env spaces, replay, "
            "graph, build). Wall clock and process CPU time; the 1-minute load average at each start (2 cores).",
            "",
            build_table(result),
            "",
        ]
    parts += [
        "## Method",
        "",
        "- **ours**: `reference_agents.components.memories.HostFrameReplay(capacity, (84, 84), 4, "
        "prioritized=True, alpha=0.6, beta=0.4, compression=None | 'lz4')`, the store `dqn_pong` uses "
        "(`memory: {type: frames, form: host}`). Insert: `store.add(records)`; sample: `store.sample(32)` "
        "then `np.ascontiguousarray` of its states and next states.",
        "- **RLlib**: `ray.rllib.utils.replay_buffers.prioritized_replay_buffer.PrioritizedReplayBuffer("
        "capacity, storage_unit='timesteps', alpha=0.6)`. Insert: a `SampleBatch` with `obs`, `new_obs`, "
        "`actions`, `rewards`, `terminateds`, `truncateds`, compressed with `SampleBatch.compress(bulk=False)` "
        "(what `RolloutWorker` does under `AlgorithmConfig.env_runners(compress_observations=True)`: each "
        "observation LZ4-packed, base64 text), then `buffer.add`; sample: `buffer.sample(32, beta=0.4)`, "
        "whose `_encode_sample` concatenates the rows and calls `decompress_if_needed()`. The new API stack's "
        "`EpisodeReplayBuffer` family has no compression option, so the old stack's buffer is the one with it.",
        "- Timing: `harness.measure.timing.interleaved_rates` over all (contender, operation) pairs; inserts keep "
        "taking the next records of the rollout (the stores are full, so each insert overwrites the oldest).",
        "",
        "## Environment",
        "",
        f"- date: {env['date']}; git revision: `{env['git_revision']}`",
        f"- machine: {env['machine']} ({env['processor']})",
        f"- Python {env['python']}, NumPy {env['numpy']}, lz4 {ver.get('lz4')}, Ray/RLlib {ver.get('ray')}, "
        f"TensorFlow {env.get('tensorflow')}, PyTorch {env.get('torch')}",
        f"- load average (1, 5, 15 min) before: {env['load_average_before']}, after: "
        f"{env['load_average_after']} (the machine is shared); the run took {env['measurement_seconds']} s",
        *([f"- the subprocess sections ({', '.join(env['subprocess_sections']['redone'])}) were measured again on "
           f"{env['subprocess_sections']['date']} at `{env['subprocess_sections']['git_revision']}` (load "
           f"{env['subprocess_sections']['load_average_before']} before, "
           f"{env['subprocess_sections']['load_average_after']} after, "
           f"{env['subprocess_sections']['measurement_seconds']} s) with `--redo-subprocesses`"]
          if env.get("subprocess_sections") else []),
        f"- raw numbers: `reports/{STEM}.json`",
        "",
        "## Reproduce",
        "",
        "```",
        "python3 -m venv /work/venv-peers && /work/venv-peers/bin/pip install -e '.[tf,torch]' 'ray[rllib]==2.60.*'",
        f"PYTHONPATH=. /work/venv-peers/bin/python -m spacegraph.reports.frame_replay_peers --capacity "
        f"{cfg['capacity']} --seconds {cfg['seconds']:g} --rounds {cfg['rounds']}"
        + (" --full-process" if result.get("full_process") else "")
        + (f" --build-runs {cfg['build_runs']}" if cfg.get("build_runs") else ""),
        "```",
        "",
    ]
    return "\n".join(parts)


def plot(result: dict[str, Any], path: str | Path) -> None:
    """Sample and insert rates per CPU-second (median, range as error bars) and bytes per transition at 1M."""
    from harness.measure.files import pyplot

    plt = pyplot("frame_replay_peers.plot")
    names = list(result["contenders"])
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    for ax, op, label in ((axes[0], "sample", "batches of 32 per CPU-s"), (axes[1], "insert", "records per CPU-s")):
        # sample: as returned (the bar) with the contiguous variant's median as a marker
        med = [result["contenders"][n][op]["per_cpu_s"]["median"] for n in names]
        lo = [m - result["contenders"][n][op]["per_cpu_s"]["min"] for m, n in zip(med, names)]
        hi = [result["contenders"][n][op]["per_cpu_s"]["max"] - m for m, n in zip(med, names)]
        ax.bar(range(len(names)), med, yerr=[lo, hi], color=["C0" if n.startswith("ours") else "C1" for n in names])
        if op == "sample":
            ax.plot(range(len(names)), [result["contenders"][n]["sample_contiguous"]["per_cpu_s"]["median"]
                                        for n in names], "kv", label="+ contiguous NHWC")
            ax.legend(fontsize=8)
        ax.set_xticks(range(len(names)), names, rotation=20, fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel(label)
        ax.set_title(op)
    b = [result["contenders"][n]["rss_bytes_per_transition"] * 1e6 / 1e9 for n in names]
    a = [result["contenders"][n]["accounted_bytes_per_transition"] * 1e6 / 1e9 for n in names]
    x = np.arange(len(names))
    axes[2].bar(x - 0.2, a, 0.4, label="accounted")
    axes[2].bar(x + 0.2, b, 0.4, label="RSS growth")
    axes[2].axhline(TARGETS["bytes_1m"] / 1e9, color="grey", ls="--", lw=0.8)
    axes[2].axhline(TARGETS["bytes_1m_lz4"] / 1e9, color="grey", ls=":", lw=0.8)
    axes[2].set_xticks(x, names, rotation=20, fontsize=8)
    axes[2].set_ylabel("GB per 1M transitions")
    axes[2].set_yscale("log")
    axes[2].legend(fontsize=8)
    axes[2].set_title("bytes (targets 7.5 / 2 GB dashed)")
    fig.suptitle(f"Frame replay vs RLlib, Pong, capacity {result['config']['capacity']:,}, "
                 f"{result['environment']['date']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write(result: dict[str, Any], out_dir: str | Path = REPORT_DIR, stem: str = STEM) -> dict[str, Path]:
    from harness.measure.files import write_report

    return write_report(result, out_dir, stem, markdown, plot)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacity", type=int, default=100_000)
    parser.add_argument("--num-envs", type=int, default=4)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--no-rllib", action="store_true")
    parser.add_argument("--rllib-uncompressed", type=int, default=20_000,
                        help="capacity of RLlib's buffer without compression (0: leave it out)")
    parser.add_argument("--full-process", action="store_true", help="peak RSS of dqn_pong processes with 1M replays")
    parser.add_argument("--full-fill", type=int, default=1_000_000)
    parser.add_argument("--backends", default="torch,tf")
    parser.add_argument("--build-runs", type=int, default=0)
    parser.add_argument("--out-dir", default=str(REPORT_DIR))
    parser.add_argument("--from-json", help="rewrite the report from a result JSON instead of measuring")
    parser.add_argument("--redo-subprocesses", metavar="JSON",
                        help="keep this result's in-process part and measure again only the sections asked for "
                             "(--full-process, --build-runs), on the same rollout (same envs, steps and seed)")
    args = parser.parse_args(argv)
    if args.from_json:
        result = json.loads(Path(args.from_json).read_text())
    elif args.redo_subprocesses:
        result = redo_subprocesses(json.loads(Path(args.redo_subprocesses).read_text()), args.full_process,
                                   args.full_fill, tuple(args.backends.split(",")), args.build_runs)
    else:
        result = measure(args.capacity, args.num_envs, args.steps, seconds=args.seconds, rounds=args.rounds,
                         rllib=not args.no_rllib, rllib_uncompressed=args.rllib_uncompressed,
                         full=args.full_process, full_fill=args.full_fill, backends=tuple(args.backends.split(",")),
                         build_runs=args.build_runs)
    paths = write(result, args.out_dir)
    print(verdict_table(result))
    print(rates_table(result))
    print(f"wrote {', '.join(str(p) for p in paths.values())}")
    return result


if __name__ == "__main__":
    main()
