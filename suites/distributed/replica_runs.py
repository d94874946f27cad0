"""What the replica-process tests of ``spacegraph train --replicas`` share: small CartPole configs, the
replica processes of a process tree, and the check that none is left."""

from __future__ import annotations

import json
import os
import time

import psutil
import yaml

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
#: Env for a CLI subprocess: one framework thread, quiet TensorFlow.
QUIET_ENV = {"OMP_NUM_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1",
             "TF_CPP_MIN_LOG_LEVEL": "3", "TF_ENABLE_ONEDNN_OPTS": "0"}


def write_config(folder: str, name: str, **changes) -> str:
    """``reference_agents/configs/<name>.yaml`` made small for tests (``changes`` replace top-level keys)."""
    with open(os.path.join(ROOT, "reference_agents", "configs", f"{name}.yaml")) as fh:
        cfg = yaml.safe_load(fh)
    small = {"evaluation": {"every": 500, "screen_episodes": 1, "episodes": 2, "target_return": 1e9}}
    if name != "impala_cartpole":  # DQN and Ape-X: a small network learning after 200 steps
        small.update(network={"layers": [{"type": "dense", "units": 32, "activation": "relu"}], "dueling": True},
                     update={"batch_size": 32, "start_after": 200, "every": 4, "repeats": 1})
    else:
        small.update(env={"id": "CartPole-v1", "num_envs": 4}, rollout={"length": 10, "batch_size": 2})
    cfg.update(small, **changes)
    path = os.path.join(folder, f"{name}_tiny.yaml")
    with open(path, "w") as fh:
        yaml.safe_dump(cfg, fh)
    return path


def is_replica(process: psutil.Process) -> bool:
    """A process `multiprocessing` spawned (a replica process; its resource tracker is no replica)."""
    try:
        line = " ".join(process.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False
    return "spawn_main" in line


def replicas_of(pid: int) -> list[psutil.Process]:
    """The spawned (replica) processes below ``pid``, alive now."""
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [p for p in children if is_replica(p) and alive(p)]


def alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def left_running(processes: list[psutil.Process], wait_s: float = 5.0) -> list[psutil.Process]:
    """Those of ``processes`` still running after up to ``wait_s`` seconds (a process ending takes a moment)."""
    deadline = time.monotonic() + wait_s
    while True:
        left = [p for p in processes if alive(p)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def trainer_state(run: str) -> dict:
    with open(os.path.join(run, "checkpoint", "trainer.json")) as fh:
        return json.load(fh)


def rows(run: str) -> list[dict]:
    with open(os.path.join(run, "metrics.jsonl")) as fh:
        return [json.loads(line) for line in fh]
