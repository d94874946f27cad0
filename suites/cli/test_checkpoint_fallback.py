"""`--resume` falls back to ``checkpoint.old`` when the newest checkpoint is damaged (DQN, IMPALA, Ape-X), and a
save cut at any of its steps never leaves a run without a whole checkpoint nor deletes the only good one."""

from __future__ import annotations

import io
import os
import shutil

import pytest

from harness.execution.serialization import read_npz
from reference_agents.agents import DQNAgent
from reference_agents.training import Trainer
from reference_agents.training.checkpoints import (
    checkpoint_trainer_state, checkpoint_worker_state, load_newest, write_checkpoint)
from spacegraph.cli import main
from suites.cli.test_train import checkpoint_counts, read_csv, write_config


def tree(folder) -> dict[str, bytes]:
    """Every file under ``folder`` with its bytes."""
    return {os.path.relpath(os.path.join(root, f), folder): open(os.path.join(root, f), "rb").read()
            for root, _, files in os.walk(folder) for f in files}


def cut(path, fraction: float = 0.5) -> None:
    data = open(path, "rb").read()
    with open(path, "wb") as fh:
        fh.write(data[:int(len(data) * fraction)])


def steps_of(ckpt: str) -> int:
    """Reads a whole checkpoint folder (every archive, both JSON files); its env steps."""
    checkpoint_trainer_state(ckpt)
    for root, _, files in os.walk(ckpt):
        for f in files:
            if f.endswith(".npz"):
                read_npz(os.path.join(root, f))
    return checkpoint_worker_state(ckpt)["total_steps"]


@pytest.fixture
def dqn_run(tmp_path):
    """A DQN run with checkpoints at 200 (now ``checkpoint.old``) and 400 env steps."""
    run = tmp_path / "run"
    assert main(["train", write_config(tmp_path), "--steps", "400", "--eval-every", "200", "--checkpoint-every",
                 "200", "--out", str(run), "--quiet"]) == 0
    assert steps_of(str(run / "checkpoint.old")) == 200 and steps_of(str(run / "checkpoint")) == 400
    return run


def test_resume_passes_a_damaged_checkpoint_over_for_checkpoint_old_and_keeps_it(dqn_run, capsys):
    cut(dqn_run / "checkpoint" / "agent_variables.npz")
    old = tree(dqn_run / "checkpoint.old")
    capsys.readouterr()
    assert main(["train", "--resume", str(dqn_run), "--steps", "400", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert f"warning: {dqn_run}/checkpoint/agent_variables.npz is damaged: truncated" in err, err
    assert f"resuming from the older checkpoint {dqn_run}/checkpoint.old, 200 env steps behind it (at 200)" in err
    assert "Traceback" not in err
    # it trained on from 200 to 400; the new checkpoint replaced the damaged one, checkpoint.old is untouched
    assert checkpoint_counts(dqn_run)["worker_steps"] == 400
    assert [int(r["env_steps"]) for r in read_csv(dqn_run / "metrics.csv")[1]] == [200, 400]
    assert tree(dqn_run / "checkpoint.old") == old
    assert not [f for f in os.listdir(dqn_run) if f.startswith(".checkpoint-")]


@pytest.mark.parametrize("damage", ["agent_state.npz", "trainer.json", "worker.json"])
def test_resume_with_both_checkpoints_damaged_exits_2_naming_both_and_changes_nothing(dqn_run, capsys, damage):
    cut(dqn_run / "checkpoint" / damage)
    open(dqn_run / "checkpoint.old" / "agent_variables.npz", "wb").close()
    before = tree(dqn_run)
    capsys.readouterr()
    assert main(["train", "--resume", str(dqn_run), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("spacegraph train: ") and "Traceback" not in err, err
    assert f"{dqn_run}/checkpoint/{damage} " in err and f"{dqn_run}/checkpoint.old/" in err, err
    assert tree(dqn_run) == before


def test_a_missing_newest_checkpoint_resumes_from_checkpoint_old_and_says_so(dqn_run, capsys):
    shutil.rmtree(dqn_run / "checkpoint")  # (a save cut between its renames)
    capsys.readouterr()
    assert main(["train", "--resume", str(dqn_run), "--steps", "400", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert f"warning: {dqn_run}/checkpoint is missing" in err and "checkpoint.old" in err
    assert checkpoint_counts(dqn_run)["worker_steps"] == 400


def test_an_impala_run_whose_newest_state_file_is_damaged_resumes_as_impala(tmp_path, capsys):
    from spacegraph.train import resumed_kind
    from suites.cli.test_train_impala import write_config as impala_config

    run = tmp_path / "run"
    assert main(["train", impala_config(str(tmp_path)), "--backend", "torch", "--steps", "800", "--checkpoint-every",
                 "400", "--out", str(run), "--quiet"]) == 0
    cut(run / "checkpoint" / "agent_state.npz", 0.3)
    assert resumed_kind(str(run)) == "impala"  # (told by checkpoint.old: the newest is damaged)
    capsys.readouterr()
    assert main(["train", "--resume", str(run), "--steps", "800", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert f"warning: {run}/checkpoint/agent_state.npz is damaged" in err and "400 env steps behind" in err, err
    assert steps_of(str(run / "checkpoint")) == 800


def test_an_apex_run_whose_newest_shard_snapshot_is_damaged_resumes_from_checkpoint_old(tmp_path, capsys):
    from suites.agents.test_apex import small_config

    import yaml

    config = tmp_path / "apex.yaml"
    config.write_text(yaml.safe_dump(small_config()))
    run = tmp_path / "run"
    common = ["--eval-every", "150", "--checkpoint-every", "150", "--screen-episodes", "1", "--quiet"]
    assert main(["train", str(config), "--executor", "local", "--shards", "2", "--steps", "300", "--out", str(run),
                 *common]) == 0
    assert os.path.exists(run / "checkpoint.old" / "shards" / "shard-1.npz")
    cut(run / "checkpoint" / "shards" / "shard-1.npz", 0.7)
    old = tree(run / "checkpoint.old")
    capsys.readouterr()
    assert main(["train", "--resume", str(run), "--steps", "300", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert f"warning: {run}/checkpoint/shards/shard-1.npz is damaged" in err and "checkpoint.old" in err, err
    assert tree(run / "checkpoint.old") == old


# ---- saves cut short -----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def three_saves(tmp_path_factory):
    """A run folder with checkpoints at 100 (``checkpoint.old``) and 200, and a trainer at 300 to save again."""
    tmp = tmp_path_factory.mktemp("saves")
    agent = DQNAgent(write_config(tmp))
    trainer = Trainer(agent, tmp / "run", progress=False)
    trainer.train(100)
    trainer.train(200)
    shutil.copytree(tmp / "run", tmp / "base")
    assert steps_of(str(tmp / "base" / "checkpoint.old")) == 100 and steps_of(str(tmp / "base" / "checkpoint")) == 200
    trainer.train(300)
    return tmp / "base", trainer


def _save_cut_at(monkeypatch, folder, trainer, cut_at: int | None) -> None:
    """``write_checkpoint`` into ``folder``, its ``cut_at``-th rename failing (None: none fails)."""
    real, calls = os.rename, []

    def rename(src, dst):
        calls.append(dst)
        if len(calls) - 1 == cut_at:
            raise OSError("the machine went down")
        real(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    try:
        if cut_at is None:
            write_checkpoint(str(folder), trainer.agent, trainer.worker, trainer)
        else:
            with pytest.raises(OSError, match="went down"):
                write_checkpoint(str(folder), trainer.agent, trainer.worker, trainer)
    finally:
        monkeypatch.setattr(os, "rename", real)


@pytest.mark.parametrize("cut_at", [0, 1, 2])
def test_a_save_cut_at_any_rename_leaves_the_last_whole_checkpoint(three_saves, tmp_path, monkeypatch, cut_at):
    base, trainer = three_saves
    folder = tmp_path / "run"
    shutil.copytree(base, folder)
    _save_cut_at(monkeypatch, folder, trainer, cut_at)
    _, steps, _ = load_newest(str(folder), steps_of, stream=io.StringIO())
    assert steps == 200  # never older than the last whole save


def test_a_save_rotates_the_previous_checkpoint_into_checkpoint_old(three_saves, tmp_path, monkeypatch):
    base, trainer = three_saves
    folder = tmp_path / "run"
    shutil.copytree(base, folder)
    previous = tree(folder / "checkpoint")
    _save_cut_at(monkeypatch, folder, trainer, None)
    assert steps_of(str(folder / "checkpoint")) == 300 and tree(folder / "checkpoint.old") == previous


@pytest.mark.parametrize("newest, cut_at", [("missing", None), ("missing", 0), ("damaged", None), ("damaged", 0),
                                            ("damaged", 1)])
def test_a_save_never_deletes_the_only_whole_checkpoint(three_saves, tmp_path, monkeypatch, newest, cut_at):
    """``checkpoint.old`` is the only whole checkpoint (the newest is missing or damaged): a save keeps it,
    whether it completes or is cut at any of its renames."""
    base, trainer = three_saves
    folder = tmp_path / "run"
    shutil.copytree(base, folder)
    if newest == "missing":
        shutil.rmtree(folder / "checkpoint")
    else:
        cut(folder / "checkpoint" / "agent_variables.npz")
    only = tree(folder / "checkpoint.old")
    _save_cut_at(monkeypatch, folder, trainer, cut_at)
    assert tree(folder / "checkpoint.old") == only
    _, steps, _ = load_newest(str(folder), steps_of, stream=io.StringIO())
    assert steps == (300 if cut_at is None else 100)
