"""`spacegraph checkpoint inspect`: what a checkpoint holds, from metadata and array headers (no agent built, no
TensorFlow or PyTorch imported); a run directory shows its newest readable checkpoint; bad input exits 2 with one
error naming the path."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

from harness.execution.formats import PROJECT_VERSION
from spacegraph.cli import main

GOLDEN = Path(__file__).parent / "golden" / "format_1"
ROOT = Path(__file__).parents[2]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(["checkpoint", "inspect", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_inspect_imports_neither_tensorflow_nor_torch_and_reports_every_array(tmp_path):
    code = ("import json, sys\nfrom spacegraph.cli import main\n"
            f"rc = main(['checkpoint', 'inspect', '--json', {str(GOLDEN / 'apex_tf')!r}])\n"
            "print(json.dumps({'rc': rc, 'heavy': sorted(m for m in ('tensorflow', 'torch', 'ray') "
            "if m in sys.modules)}))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout[:done.stdout.rindex("\n{")])
    assert json.loads(done.stdout.splitlines()[-1]) == {"rc": 0, "heavy": []}
    assert (info["agent"], info["backend"], info["format"], info["format_version"], info["spacegraph"],
            info["status"]) == ("apex", "tf", "spacegraph-dqn-checkpoint", 1, PROJECT_VERSION, "current")
    assert info["checkpoint"] == str(GOLDEN / "apex_tf" / "checkpoint") and info["config"]["apex"]["shards"] == 1
    assert info["counters"]["total_steps"] == 200 and info["counters"]["replay_held"] > 0
    files = {f["name"]: f for f in info["files"]}
    assert sorted(files) == ["agent_replay.npz", "agent_state.npz", "agent_variables.npz", "apex.json",
                             os.path.join("shards", "shard-0.npz"), "trainer.json", "worker.json"]
    with np.load(GOLDEN / "apex_tf" / "checkpoint" / "agent_variables.npz") as data:
        truth = {k: [list(data[k].shape), data[k].dtype.name, data[k].nbytes] for k in data.files}
    assert {a["name"]: [a["shape"], a["dtype"], a["bytes"]] for a in files["agent_variables.npz"]["arrays"]} == truth
    assert files["apex.json"]["format"] == "spacegraph-apex-state" and files["trainer.json"]["format_version"] == 1
    assert all(f["bytes"] == os.path.getsize(GOLDEN / "apex_tf" / "checkpoint" / f["name"]) for f in info["files"])


def test_the_text_names_agent_backend_format_writer_counters_and_files(capsys):
    rc, out, err = run(capsys, str(GOLDEN / "dqn_torch_unversioned" / "checkpoint"))
    assert rc == 0 and err == ""
    assert "agent        dqn on torch\n" in out
    assert f"format       spacegraph-dqn-checkpoint, version 1: the current format: spacegraph {PROJECT_VERSION} " \
           f"loads it\n" in out
    assert "written by   a spacegraph that recorded no versions (format 1), saved 20" in out
    assert "counters     timesteps 200, updates " in out and "(a summary; --config prints it whole)" in out
    assert "w:dqn/q_network/network/dense_0/kernel" in out and "(4, 16) float32" in out
    rc, whole, _ = run(capsys, "--config", str(GOLDEN / "dqn_torch_unversioned" / "checkpoint"))
    assert rc == 0 and '"learning_rate": 0.001' in whole and "--config prints it whole" not in whole


def test_a_run_directory_shows_its_newest_readable_checkpoint(tmp_path, capsys):
    run_dir = tmp_path / "run"
    shutil.copytree(GOLDEN / "impala_tf", run_dir)
    rc, out, _ = run(capsys, str(run_dir))
    assert rc == 0 and out.startswith(f"checkpoint   {run_dir}/checkpoint  (the newest of the run {run_dir})\n")
    shutil.copytree(run_dir / "checkpoint", run_dir / "checkpoint.old")
    (run_dir / "checkpoint" / "agent_state.npz").write_bytes(b"PK\x03\x04 cut short")
    rc, out, _ = run(capsys, str(run_dir))
    assert rc == 0 and out.startswith(f"checkpoint   {run_dir}/checkpoint.old  (the newest of the run {run_dir})\n"
                                      f"note         {run_dir}/checkpoint is damaged or incomplete: showing the "
                                      f"older one\n"), out


def test_a_newer_format_is_shown_with_what_to_do(tmp_path, capsys):
    shutil.copytree(GOLDEN / "dqn_tf" / "checkpoint", tmp_path / "c")
    state = json.loads((tmp_path / "c" / "trainer.json").read_text())
    (tmp_path / "c" / "trainer.json").write_text(json.dumps(dict(state, format_version=3)))
    rc, out, _ = run(capsys, "--json", str(tmp_path / "c" / "trainer.json"))
    info = json.loads(out)
    assert rc == 0 and (info["format_version"], info["status"]) == (3, "too-new")
    assert info["status_words"] == f"newer than spacegraph {PROJECT_VERSION} reads (format 1): upgrade spacegraph"


def test_bad_input_gets_one_error_naming_it_and_exit_status_2(tmp_path, capsys):
    expected = "expected a run directory (with checkpoint/ or checkpoint.old/), a checkpoint directory (with " \
               "agent_state.npz, apex.json, trainer.json) or a file spacegraph saved (.npz or .json)"
    rc, out, err = run(capsys, str(tmp_path / "nothing"))
    assert (rc, out, err) == (2, "", f"spacegraph checkpoint inspect: {tmp_path}/nothing does not exist; "
                                     f"{expected}\n")
    (tmp_path / "notes.txt").write_text("hello")
    rc, out, err = run(capsys, str(tmp_path))
    assert (rc, out, err) == (2, "", f"spacegraph checkpoint inspect: {tmp_path} is not a checkpoint: {expected}; "
                                     f"it holds ['notes.txt']\n")
    rc, _, err = run(capsys, str(tmp_path / "notes.txt"))
    assert rc == 2 and err == f"spacegraph checkpoint inspect: {tmp_path}/notes.txt is not a checkpoint: {expected}\n"
    (tmp_path / "other.json").write_text('{"a": 1}')
    rc, _, err = run(capsys, str(tmp_path / "other.json"))
    assert rc == 2 and err.startswith(f"spacegraph checkpoint inspect: {tmp_path}/other.json is not a file spacegraph "
                                      f"saved: it records no format; expected")


def test_a_damaged_file_is_named_and_exits_2(tmp_path, capsys):
    shutil.copytree(GOLDEN / "impala_torch" / "checkpoint", tmp_path / "c")
    (tmp_path / "c" / "agent_variables.npz").write_bytes(b"")
    rc, out, err = run(capsys, str(tmp_path / "c"))
    assert rc == 2 and "agent        impala on torch" in out
    assert err == f"spacegraph checkpoint inspect: {tmp_path}/c/agent_variables.npz is empty (0 bytes)\n"
