"""Format versions (`harness.execution.formats`): every saved file is stamped; a file without a version is format
1; migrations registered per format and from-version run in order when an older checkpoint loads through the
public loader; an older format no migration reaches and a newer one are refused with one error naming the file,
the kind, both versions and what to do; ``--resume`` does not take such a refusal for damage."""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from harness.execution import formats
from harness.execution.formats import (PROJECT_VERSION, FileFormat, declare_format, register_migration, stamp,
                                       upgrade)
from harness.execution.serialization import BadFileError, FormatVersionError, read_npz
from reference_agents.agents import load_checkpoint
from reference_agents.agents.dqn.checkpoints import CHECKPOINT_FORMAT as DQN_FORMAT

GOLDEN = Path(__file__).parent / "golden" / "format_1"


@pytest.fixture
def fresh_formats(monkeypatch):
    """The format registry as it is, restored after the test (declarations and migrations made in it vanish)."""
    saved = {k: FileFormat(f.name, f.version, f.kind, dict(f.migrations)) for k, f in formats.FORMATS.items()}
    monkeypatch.setattr(formats, "FORMATS", saved)
    return saved


def _golden(tmp_path, case: str) -> str:
    shutil.copytree(GOLDEN / case, tmp_path / case)
    return str(tmp_path / case / "checkpoint")


def _rewrite_state_meta(ckpt: str, **changes) -> None:
    """Rewrites the metadata of ``ckpt``'s agent_state.npz (keys set to None are removed)."""
    path = os.path.join(ckpt, "agent_state.npz")
    meta, arrays = read_npz(path, meta_key="__meta__", versions=False)
    meta.update(changes)
    meta = {k: v for k, v in meta.items() if v is not None}
    np.savez(path, __meta__=np.array(json.dumps(meta)), **arrays)


def test_model_exports_are_stamped(tmp_path):
    agent = load_checkpoint(str(GOLDEN / "impala_torch" / "checkpoint"))
    meta, _ = read_npz(agent.export_model(str(tmp_path / "m")), meta_key="__meta__", versions=False)
    assert (meta["format"], meta["format_version"], meta["spacegraph"]) == ("spacegraph-impala-model", 1,
                                                                           PROJECT_VERSION)
    agent.import_model(str(tmp_path / "m.npz"))
    meta, _ = read_npz(agent.executor.export_model(str(tmp_path / "h")), meta_key="__spacegraph_meta__")
    assert (meta["format"], meta["format_version"], meta["spacegraph"]) == ("spacegraph-model", 1, PROJECT_VERSION)


def test_a_model_file_of_a_newer_format_is_refused_and_the_agent_left_as_it_was(tmp_path):
    agent = load_checkpoint(str(GOLDEN / "dqn_tf" / "checkpoint"))
    path = agent.export_model(str(tmp_path / "m"))
    meta, arrays = read_npz(path, meta_key="__meta__", versions=False)
    np.savez(path, __meta__=np.array(json.dumps(dict(meta, format_version=2))),
             **{k: np.zeros_like(v) for k, v in arrays.items()})
    before = agent.get_weights()
    with pytest.raises(FormatVersionError, match=rf"^DQNAgent.import_model: {path} is a DQN model file in format 2, "
                                                 rf"written by spacegraph {PROJECT_VERSION}; .*upgrade spacegraph"):
        agent.import_model(path)
    assert all(np.array_equal(v, agent.get_weights()[k]) for k, v in before.items())


def test_stamp_writes_the_three_keys_first_and_refuses_meta_that_sets_them(fresh_formats):
    declare_format("toy", 3, "a toy file")
    assert list(stamp("toy", {"a": 1}).items()) == [("format", "toy"), ("format_version", 3),
                                                     ("spacegraph", PROJECT_VERSION), ("a", 1)]
    assert stamp("undeclared-toy")["format_version"] == 1
    with pytest.raises(ValueError, match=r"must not set \['format_version'\]"):
        stamp("toy", {"format_version": 2})


def test_migrations_run_in_order_from_the_files_version(fresh_formats):
    declare_format("toy", 4, "a toy file")
    for v in (1, 2, 3):
        register_migration("toy", v, lambda m, a, v=v: ({**m, "steps": m.get("steps", []) + [v]},
                                                        {**a, f"x{v}": np.zeros(v)}))
    meta, arrays = upgrade("f.npz", {"format": "toy", "format_version": 2}, {})
    assert meta["steps"] == [2, 3] and meta["format_version"] == 4 and meta["migrated_from"] == 2
    assert sorted(arrays) == ["x2", "x3"]
    meta, _ = upgrade("f.npz", {"format": "toy"}, {})  # no version recorded: format 1
    assert meta["steps"] == [1, 2, 3]


def test_a_gap_in_the_migrations_refuses_the_versions_before_it(fresh_formats):
    declare_format("toy", 3, "a toy file")
    register_migration("toy", 2, lambda m, a: (m, a))
    assert formats.FORMATS["toy"].readable() == "formats 2 to 3"
    with pytest.raises(FormatVersionError) as err:
        upgrade("run/f.npz", {"format": "toy", "format_version": 1, "spacegraph": "0.0.9"})
    assert str(err.value) == ("run/f.npz is a toy file in format 1, written by spacegraph 0.0.9; this is spacegraph "
                              f"{PROJECT_VERSION}, reading formats 2 to 3 of it (no migration from format 1): "
                              "re-train, or keep using it with the spacegraph version that wrote it")


@pytest.mark.parametrize("version", ["2", 0, True, 1.5])
def test_a_format_version_that_is_no_int_from_1_is_refused(version):
    with pytest.raises(BadFileError, match=r"f.npz has format_version = .* in its metadata, expected an int >= 1"):
        upgrade("f.npz", {"format": DQN_FORMAT, "format_version": version})


def test_register_migration_refuses_what_cannot_be_a_step(fresh_formats):
    declare_format("toy", 2, "a toy file")
    with pytest.raises(ValueError, match="from_version must be an int from 1 to 1"):
        register_migration("toy", 2, lambda m, a: (m, a))
    with pytest.raises(ValueError, match="'nope' is not declared"):
        register_migration("nope", 1, lambda m, a: (m, a))


def test_a_toy_migration_upgrades_a_golden_checkpoint_through_load_checkpoint(fresh_formats, tmp_path):
    """DQN's checkpoint format pretends to be at version 2: format 2 counts updates from 1000 (the toy change);
    today's golden checkpoints are format 1 and load through the migration."""
    declare_format(DQN_FORMAT, 2, "a DQN checkpoint")
    seen = []

    def one_to_two(meta, arrays):
        seen.append(meta["format_version"] if "format_version" in meta else None)
        return {**meta, "updates": meta["updates"] + 1000}, arrays

    register_migration(DQN_FORMAT, 1, one_to_two)
    for case in ("dqn_torch", "dqn_torch_unversioned"):
        ckpt = _golden(tmp_path, case)
        saved, _ = read_npz(os.path.join(ckpt, "agent_state.npz"), meta_key="__meta__", versions=False)
        agent = load_checkpoint(ckpt)
        assert agent.updates == saved["updates"] + 1000
    # each checkpoint's metadata is read (and migrated) a few times: to find the agent, its config, then its state
    assert seen.count(1) == seen.count(None) >= 1 and len(seen) == 2 * seen.count(1), seen


def test_an_older_format_without_a_migration_is_refused_naming_file_kind_versions_and_what_to_do(
        fresh_formats, tmp_path):
    declare_format(DQN_FORMAT, 2, "a DQN checkpoint")
    ckpt = _golden(tmp_path, "dqn_tf")
    with pytest.raises(FormatVersionError) as err:
        load_checkpoint(ckpt)
    assert str(err.value) == (
        f"load_checkpoint: {ckpt} holds no readable agent checkpoint: {ckpt}/agent_state.npz is a DQN checkpoint in "
        f"format 1, written by spacegraph {PROJECT_VERSION}; this is spacegraph {PROJECT_VERSION}, reading format "
        f"2 of it (no migration from format 1): re-train, or keep using it with the spacegraph version that wrote it")


def test_a_newer_format_is_refused_with_upgrade_spacegraph(tmp_path):
    ckpt = _golden(tmp_path, "impala_torch")
    _rewrite_state_meta(ckpt, format_version=7, spacegraph="9.0")
    with pytest.raises(FormatVersionError, match=(
            rf"{ckpt}/agent_state.npz is an IMPALA checkpoint in format 7, written by spacegraph 9.0; this is "
            rf"spacegraph {PROJECT_VERSION}, reading format 1 of it: upgrade spacegraph to load it$")):
        load_checkpoint(ckpt)


def _newer_trainer_state_beside_a_whole_checkpoint_old(tmp_path) -> tuple[str, str]:
    ckpt = _golden(tmp_path, "dqn_torch")
    run = os.path.dirname(ckpt)
    shutil.copytree(ckpt, os.path.join(run, "checkpoint.old"))
    with open(os.path.join(ckpt, "trainer.json")) as fh:
        state = json.load(fh)
    with open(os.path.join(ckpt, "trainer.json"), "w") as fh:
        json.dump(dict(state, format_version=2, spacegraph="0.2.0"), fh)
    return run, ckpt


def test_trainer_resume_refuses_a_newer_format_at_once_instead_of_falling_back_to_checkpoint_old(tmp_path):
    from reference_agents.training import Trainer

    run, ckpt = _newer_trainer_state_beside_a_whole_checkpoint_old(tmp_path)
    stream = io.StringIO()
    with pytest.raises(FormatVersionError) as err:
        Trainer.resume(run, stream=stream)
    assert str(err.value) == (
        f"Trainer.resume: {run} holds a checkpoint this spacegraph does not read: {ckpt}/trainer.json is a trainer "
        f"state in format 2, written by spacegraph 0.2.0; this is spacegraph {PROJECT_VERSION}, reading format 1 of "
        f"it: upgrade spacegraph to load it")
    assert stream.getvalue() == ""  # no "resuming from the older checkpoint" warning


def test_read_trainer_state_refuses_a_newer_format_instead_of_reading_checkpoint_old(tmp_path):
    from reference_agents.training.checkpoints import read_trainer_state

    run, ckpt = _newer_trainer_state_beside_a_whole_checkpoint_old(tmp_path)
    with pytest.raises(FormatVersionError, match=f"^{run} holds a training checkpoint this spacegraph does not read: "
                                                 f"{ckpt}/trainer.json is a trainer state in format 2"):
        read_trainer_state(run)


def test_spacegraph_train_resume_refuses_a_newer_format_and_changes_nothing(tmp_path, capsys):
    from spacegraph.cli import main

    run, ckpt = _newer_trainer_state_beside_a_whole_checkpoint_old(tmp_path)
    before = {f: os.path.getmtime(os.path.join(r, f)) for r, _, fs in os.walk(run) for f in fs}
    assert main(["train", "--resume", run, "--steps", "400", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"{ckpt}/trainer.json is a trainer state in format 2, written by spacegraph 0.2.0" in err, err
    assert "upgrade spacegraph" in err and "checkpoint.old" not in err and "damaged" not in err, err
    assert {f: os.path.getmtime(os.path.join(r, f)) for r, _, fs in os.walk(run) for f in fs} == before
