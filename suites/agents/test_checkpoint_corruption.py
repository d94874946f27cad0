"""Damaged checkpoint files: every file of a small CartPole DQN checkpoint (both backends) and of an IMPALA one,
damaged by hypothesis (cut at a drawn length, bytes flipped at drawn offsets, emptied, a member or key dropped or
given another shape or type, replaced by a foreign archive, invalid JSON or a pickle), gives one `BadFileError`
naming that file and leaves the agent as it was, or - where the damage leaves the file whole (a flipped zip
timestamp) - reads back the same contents. Nothing in a damaged file is ever unpickled."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import tempfile
import zipfile
from typing import Any, NamedTuple

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.execution.serialization import BadFileError, read_npz, verify_npz
from reference_agents.agents import DQNAgent, IMPALAAgent
from reference_agents.agents.checkpoints import saved_agent
from reference_agents.training import Trainer
from reference_agents.training.checkpoints import checkpoint_trainer_state, checkpoint_worker_state, restore_worker
from reference_agents.workers import VectorEnvWorker

DQN = {"agent": "dqn", "seed": 1, "env": {"id": "CartPole-v1", "num_envs": 2},
       "network": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}]},
       "memory": {"type": "replay", "capacity": 500}, "loss": {"n_step": 3},  # open n-step windows get saved
       "update": {"batch_size": 8, "start_after": 40, "every": 4, "repeats": 1},
       "evaluation": {"every": 150, "episodes": 1}}
IMPALA = {"agent": "impala", "seed": 1, "env": {"id": "CartPole-v1", "num_envs": 2},
          "network": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}]},
          "rollout": {"length": 8, "batch_size": 1}, "evaluation": {"every": 150, "episodes": 1}}
CASES = {"dqn-tf": (DQNAgent, DQN, "tf"), "dqn-torch": (DQNAgent, DQN, "torch"),
         "impala-torch": (IMPALAAgent, IMPALA, "torch")}


class Payload:
    """Unpickling this creates the file ``path``: a damaged file that gets unpickled leaves that file behind."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return open, (self.path, "w")


class Saved(NamedTuple):
    """A checkpoint folder, an agent and a worker built from it once (each example restores into them) and the
    agent's weights."""

    ckpt: str
    agent: Any
    worker: Any
    weights: dict[str, np.ndarray]

    def __repr__(self) -> str:  # (hypothesis prints the arguments of a failing example)
        return f"Saved({self.ckpt!r})"


@pytest.fixture(scope="module", params=sorted(CASES))
def saved(request, tmp_path_factory) -> Saved:
    cls, config, backend = CASES[request.param]
    run = tmp_path_factory.mktemp(request.param) / "run"
    agent = cls(dict(config, backend=backend))
    Trainer(agent, run, progress=False).train(160)  # (ends mid-episode: open windows, a rollout in progress)
    ckpt = str(run / "checkpoint")
    loaded = cls.load_checkpoint(ckpt)
    return Saved(ckpt, loaded, VectorEnvWorker.for_agent(loaded), loaded.executor.get_weights())


def load_everything(ckpt: str, agent, worker) -> None:
    """What a resume reads of a checkpoint, into an agent and a worker already built."""
    checkpoint_trainer_state(ckpt)
    worker_state = checkpoint_worker_state(ckpt)
    saved_agent(ckpt, "test")
    agent.restore(ckpt)
    restore_worker(ckpt, worker, worker_state, agent)


def _other_shape(value: np.ndarray) -> np.ndarray:
    return np.zeros(value.shape + (2,), np.float64 if value.dtype.kind != "f" else np.int32)


def corrupt(path: str, damage: tuple, marker: str) -> None:
    """Applies ``damage`` (drawn by `damages`) to the file ``path``; ``marker`` is what a pickle would create."""
    kind, data, npz = damage[0], open(path, "rb").read(), path.endswith(".npz")
    if kind == "cut":
        data = data[:int(damage[1] * len(data))]
    elif kind == "flip":
        data = bytearray(data)
        for where, mask in damage[1]:
            data[int(where * len(data))] ^= mask
    elif kind == "empty":
        data = b""
    elif kind == "not json":
        data = b'{"format": "spacegraph-trainer", "history": ['
    elif kind == "pickle":
        data = pickle.dumps(Payload(marker))
    elif kind == "foreign":
        if npz:
            with open(path, "wb") as fh:
                np.savez(fh, x=np.arange(3), y=np.ones((2, 2)))
            return
        data = json.dumps({"hello": [1, 2]}).encode()
    elif npz:  # a member dropped, given another shape and dtype, or a pickled object array added
        with np.load(path, allow_pickle=False) as good:
            arrays = {k: good[k] for k in good.files}
        names = sorted(arrays)
        if kind == "pickled member" or not names:
            arrays["evil"] = np.array([Payload(marker)], dtype=object)  # (np.savez pickles object arrays)
        elif kind == "drop":
            del arrays[names[damage[1] % len(names)]]
        else:
            key = names[damage[1] % len(names)]
            arrays[key] = _other_shape(arrays[key])
        with open(path, "wb") as fh:
            np.savez(fh, **arrays)
        return
    elif kind == "pickled member":  # (JSON: the pickle appended)
        data += pickle.dumps(Payload(marker))
    else:  # JSON: a key dropped or given a value of another type
        state = json.loads(data)
        key = sorted(state)[damage[1] % len(state)]
        if kind == "drop":
            del state[key]
        else:
            state[key] = "?"
        data = json.dumps(state).encode()
    with open(path, "wb") as fh:
        fh.write(data)


def damages() -> st.SearchStrategy:
    fraction = st.floats(0, 1, exclude_max=True)
    return st.one_of(
        st.tuples(st.just("cut"), fraction),
        st.tuples(st.just("flip"), st.lists(st.tuples(fraction, st.integers(1, 255)), min_size=1, max_size=3)),
        st.sampled_from([("empty",), ("not json",), ("pickle",), ("foreign",), ("pickled member",)]),
        st.tuples(st.sampled_from(["drop", "reshape"]), st.integers(0, 1000)))


def _files(ckpt: str) -> list[str]:
    return sorted(f for f in os.listdir(ckpt))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_damaged_checkpoint_file_gives_one_error_naming_it(saved, data):
    ckpt, agent, worker, good_weights = saved
    name = data.draw(st.sampled_from(_files(ckpt)), label="file")
    damage = data.draw(damages(), label="damage")
    with tempfile.TemporaryDirectory() as tmp:
        copy, marker = os.path.join(tmp, "checkpoint"), os.path.join(tmp, "unpickled")
        shutil.copytree(ckpt, copy)
        damaged = os.path.join(copy, name)
        corrupt(damaged, damage, marker)
        try:
            load_everything(copy, agent, worker)
        except BadFileError as exc:
            assert exc.path == damaged and damaged in str(exc), str(exc)
            weights = agent.executor.get_weights()
            for key, value in good_weights.items():  # the agent is as the good checkpoint left it
                np.testing.assert_array_equal(weights[key], value, err_msg=key)
        else:  # the damage left the file whole (zip fields nothing checks), or a JSON value of the right type
            if name.endswith(".npz"):
                good, now = read_npz(os.path.join(ckpt, name))[1], read_npz(damaged)[1]
                assert sorted(now) == sorted(good) and all(np.array_equal(now[k], good[k]) for k in good)
        assert not os.path.exists(marker), "a pickle in a damaged file was loaded"
        if name.endswith(".npz"):  # verify_npz (which reads no array) finds the same damage as reading it all
            assert _reads(verify_npz, damaged) == _reads(read_npz, damaged), damage
        load_everything(ckpt, agent, worker)  # (the good checkpoint again, for the next example)


def _reads(read, path: str) -> bool:
    """Whether ``read(path)`` takes the file (`BadFileError` if not, never another error)."""
    try:
        read(path)
    except BadFileError:
        return False
    return True


@pytest.mark.parametrize("damage", [("cut", 0.5), ("empty",), ("pickle",), ("foreign",)])
def test_every_file_is_read_whole_at_once(saved, damage):
    """Each file's own damage is found (not only the first file read): the error names that file."""
    ckpt, agent, worker, _ = saved
    for name in _files(ckpt):
        with tempfile.TemporaryDirectory() as tmp:
            copy = os.path.join(tmp, "checkpoint")
            shutil.copytree(ckpt, copy)
            corrupt(os.path.join(copy, name), damage, os.path.join(tmp, "unpickled"))
            with pytest.raises(BadFileError) as info:
                load_everything(copy, agent, worker)
            assert info.value.path == os.path.join(copy, name)
            assert not os.path.exists(os.path.join(tmp, "unpickled"))


def test_a_zip_whose_member_fails_its_checksum_is_refused(tmp_path):
    path = str(tmp_path / "a.npz")
    np.savez(path, x=np.arange(100, dtype=np.int64))
    with zipfile.ZipFile(path) as archive:
        offset = archive.getinfo("x.npy").header_offset + 30 + len("x.npy") + 128 + 8 * 50
    data = bytearray(open(path, "rb").read())
    data[offset] ^= 1  # one bit of one array element: only the CRC can tell
    open(path, "wb").write(bytes(data))
    with pytest.raises(BadFileError, match=r"a\.npz is damaged: .*(CRC|checksum)"):
        read_npz(path)
