"""`--out` (and `--resume DIR`, and the default ``runs/``) is checked before any work, for `spacegraph train` (every
agent) and `spacegraph report`: a file in the way, a folder that cannot be made or is not writable gives one error
(exit 2) naming the flag and the path, before a config is read or a scenario runs, and nothing is left behind."""

from __future__ import annotations

import os
import tempfile
import types
from pathlib import Path

import pytest

import spacegraph.cli as cli
from harness.execution.serialization import check_out_dir
from reference_agents.agents import DQNAgent
from reference_agents.training import Trainer
from suites.cli.test_train import write_config


def _can_create_in(folder: Path) -> bool:
    try:
        fd, probe = tempfile.mkstemp(dir=folder)
    except OSError:
        return False
    os.close(fd)
    os.unlink(probe)
    return True


@pytest.fixture
def unwritable(tmp_path):
    """A folder nothing can be created in: a read-only one, or (for root, who writes anywhere) /sys."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        if not _can_create_in(folder):
            yield folder
        elif os.path.isdir("/sys") and not _can_create_in(Path("/sys")):
            yield Path("/sys")
        else:
            pytest.skip("no folder here refuses new files to this user")
    finally:
        folder.chmod(0o755)


@pytest.fixture
def no_work(monkeypatch):
    """Fails the test if `spacegraph train` resolves a config or `spacegraph report` runs a scenario."""
    import spacegraph.report.runner as runner

    def work(*args, **kwargs):
        raise AssertionError("work started before --out was checked")

    import reference_agents.agents as agents

    monkeypatch.setattr(agents, "resolve_config_path", work)
    monkeypatch.setattr(runner, "run", work)


def bad_places(tmp_path, unwritable) -> dict[str, tuple[str, str]]:
    """``{case: (path, what the message says)}``."""
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    return {"a file": (str(a_file), f"{a_file}: is a file, not a folder"),
            "under a file": (str(a_file / "run"), f"cannot be made: {a_file} is a file"),
            "unwritable": (str(unwritable / "run"), f"cannot be made in {unwritable}"),
            "unwritable itself": (str(unwritable), "is not writable")}


CASES = ["a file", "under a file", "unwritable", "unwritable itself"]
AGENT_ARGS = {"dqn": ["CONFIG"], "impala": ["impala_cartpole"], "apex": ["apex_cartpole", "--executor", "local"]}


@pytest.mark.parametrize("agent", sorted(AGENT_ARGS))
@pytest.mark.parametrize("case", CASES)
def test_train_checks_out_first(tmp_path, unwritable, no_work, capsys, agent, case):
    path, message = bad_places(tmp_path, unwritable)[case]
    before = sorted(os.listdir(tmp_path))
    args = [write_config(tmp_path) if a == "CONFIG" else a for a in AGENT_ARGS[agent]]
    assert cli.main(["train", *args, "--out", path, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"spacegraph train: --out {path}: ") and message in err and "Traceback" not in err, err
    assert sorted(os.listdir(tmp_path)) == sorted(before + (["tiny.yaml"] if agent == "dqn" else []))


def test_train_checks_the_default_runs_folder_and_a_resume_folder(tmp_path, no_work, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("runs").write_text("a file where the runs go")
    assert cli.main(["train", "dqn_cartpole", "--quiet"]) == 2
    assert "spacegraph train: the default --out folder runs: is a file, not a folder" in capsys.readouterr().err
    assert cli.main(["train", "--resume", "runs", "--quiet"]) == 2
    assert "spacegraph train: --resume runs: is a file, not a folder" in capsys.readouterr().err


@pytest.mark.parametrize("case", CASES)
def test_report_checks_out_before_any_scenario(tmp_path, unwritable, no_work, capsys, case):
    path, message = bad_places(tmp_path, unwritable)[case]
    assert cli.main(["report", "--only", "sampling", "--out", path]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"spacegraph report: --out {path}: ") and message in err and "Traceback" not in err, err


def test_a_report_that_cannot_be_written_at_the_end_goes_to_a_temporary_folder(tmp_path, monkeypatch, capsys):
    import spacegraph.report.runner as runner
    import spacegraph.report.writers as writers

    report = types.SimpleNamespace(seconds=60.0, peers_note=None, load_warning=None, revision="abc")
    monkeypatch.setattr(runner, "run", lambda *args, **kwargs: report)
    written = []

    def write(rep, out):
        if not written:
            written.append(None)
            raise OSError(28, "No space left on device")
        written.append(Path(out))
        return {"md": Path(out) / "report.md"}

    monkeypatch.setattr(writers, "write", write)
    assert cli.main(["report", "--only", "sampling", "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    rescue = written[-1]
    assert f"--out {tmp_path / 'out'}: cannot be written now" in err and f"went to {rescue}/ instead" in err
    assert rescue.is_dir() and rescue != tmp_path / "out"
    rescue.rmdir()


def test_check_out_dir_makes_nothing_and_leaves_no_probe(tmp_path):
    assert check_out_dir(tmp_path / "new" / "deeper") == str(tmp_path / "new" / "deeper")
    assert check_out_dir(tmp_path) == str(tmp_path)
    assert os.listdir(tmp_path) == []


def test_a_trainer_given_a_file_as_out_dir_says_so(tmp_path):
    (tmp_path / "taken").write_text("x")
    agent = DQNAgent(write_config(tmp_path))
    with pytest.raises(ValueError, match=r"Trainer: out_dir .*taken: is a file, not a folder"):
        Trainer(agent, tmp_path / "taken")
