"""asv_bench/run_offline.py: commit selection, worktrees, the import check, the loopback dashboard, end to end."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / "asv_bench" / "run_offline.py"

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _load_runner():
    spec = importlib.util.spec_from_file_location("asv_run_offline", RUNNER)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


ro = _load_runner()


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout.strip()


def _commit(repo: Path, files: dict[str, str], message: str, when: int) -> str:
    for name, text in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    _git(repo, "add", "-A")
    stamp = f"@{1_700_000_000 + when} +0000"
    subprocess.run(["git", "commit", "-q", "-m", message], cwd=repo, check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp})
    return _git(repo, "rev-parse", "HEAD")


BENCH_V = '''
import harness


class Value:
    def track_value(self):
        return float(harness.VALUE)
'''
BENCH_BROKEN = '''
class Value:
    def track_value(self):
        raise RuntimeError("broken on purpose")
'''


@pytest.fixture(scope="module")
def toy_repo(tmp_path_factory) -> tuple[Path, list[str]]:
    """A repository shaped like this one: commit 0 has no benchmarks, 1 and 2 track harness.VALUE (1, 2), 3 fails."""
    repo = tmp_path_factory.mktemp("toy") / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    shas = [_commit(repo, {"harness/__init__.py": "VALUE = 0\n", "README": "toy\n"}, "no benchmarks yet", 0)]
    common = {"asv_bench/asv.conf.json": (ROOT / "asv_bench" / "asv.conf.json").read_text(),
              "asv_bench/run_offline.py": RUNNER.read_text(),
              "asv_bench/benchmarks/__init__.py": (ROOT / "asv_bench" / "benchmarks" / "__init__.py").read_text(),
              "asv_bench/benchmarks/value.py": BENCH_V, ".gitignore": "asv_bench/html/\n"}
    shas.append(_commit(repo, {**common, "harness/__init__.py": "VALUE = 1\n"}, "benchmarks, value 1", 10))
    shas.append(_commit(repo, {"harness/__init__.py": "VALUE = 2\n"}, "value 2", 20))
    shas.append(_commit(repo, {"asv_bench/benchmarks/value.py": BENCH_BROKEN}, "broken benchmark", 30))
    return repo, shas


# ---- commit selection ---------------------------------------------------------------------------------------


def test_pick_evenly_keeps_first_and_last():
    assert ro.pick_evenly(list(range(10)), 3) == [0, 4, 9]
    assert ro.pick_evenly(list(range(10)), 2) == [0, 9]
    assert ro.pick_evenly(list(range(10)), 1) == [9]
    assert ro.pick_evenly([1, 2], 5) == [1, 2]
    with pytest.raises(ValueError, match="steps must be >= 1; got 0"):
        ro.pick_evenly([1], 0)


def test_range_is_oldest_first_and_excludes_its_start(toy_repo):
    repo, shas = toy_repo
    commits = ro.resolve_commits(f"{shas[0]}..{shas[2]}", repo=str(repo))
    assert [c.sha for c in commits] == shas[1:3]
    assert commits[0].subject == "benchmarks, value 1"
    assert [c.sha for c in ro.resolve_commits("main~3..main", steps=2, repo=str(repo))] == [shas[1], shas[3]]


def test_named_commits_are_run_in_date_order(toy_repo):
    repo, shas = toy_repo
    commits = ro.resolve_commits(commits=[shas[2][:8], "main", shas[0]], repo=str(repo))
    assert [c.sha for c in commits] == [shas[0], shas[2], shas[3]]
    assert [c.sha for c in ro.resolve_commits(shas[1], repo=str(repo))] == [shas[1]]


def test_bad_revisions_and_empty_ranges_are_named(toy_repo):
    repo, shas = toy_repo
    with pytest.raises(ro.RunnerError, match="revision 'nosuchrev': not a commit"):
        ro.resolve_commits(commits=["nosuchrev"], repo=str(repo))
    with pytest.raises(ro.RunnerError, match="revision 'nosuchrev': not a commit"):
        ro.resolve_commits("nosuchrev..main", repo=str(repo))
    with pytest.raises(ro.RunnerError, match="the range holds no commits"):
        ro.resolve_commits("main..main", repo=str(repo))
    with pytest.raises(ro.RunnerError, match="two dots"):
        ro.resolve_commits("main...main", repo=str(repo))


def test_parse_args_rejects_contradictions(capsys):
    for argv, message in ((["--steps", "2"], "--steps needs --range or --commits"),
                          (["--range", "a..b", "--steps", "0"], "--steps must be >= 1; got 0"),
                          (["--quick", "--no-run"], "contradict"),
                          (["--no-publish", "--preview"], "drop --no-publish"),
                          (["--quick", "--preview"], "needs --results-dir"),
                          (["--range", "a..b", "--commits", "c"], "not allowed with")):
        with pytest.raises(SystemExit):
            ro.parse_args(argv)
        assert message in capsys.readouterr().err


def test_run_tree_passes_the_options_to_asv(tmp_path, monkeypatch):
    runner = ro.Runner(str(tmp_path / "r"), str(tmp_path / "h"), "m", quick=True)
    calls = []
    monkeypatch.setattr(ro, "imported_from", lambda root, python: f"{root}/harness/__init__.py")
    monkeypatch.setattr(runner, "asv", lambda args, root, check: calls.append((list(args), root, check)) or 0)
    try:
        assert runner.run_tree("/tree", "abc123", True, ["build", "vtrace"], ["rounds=1"]) == 0
    finally:
        runner.close()
    (args, root, check), = calls
    assert root == "/tree" and check is False
    assert args[:2] == ["run", "--python=same"] and "--set-commit-hash=abc123" in args and "--machine=m" in args
    assert "--quick" in args and args[-6:] == ["--bench", "build", "--bench", "vtrace", "-a", "rounds=1"]
    assert ro.bench_env("/tree", {}, quick=True)["SPACEGRAPH_BENCH_QUICK"] == "1"
    assert "SPACEGRAPH_BENCH_QUICK" not in ro.bench_env("/tree", {})
    env = ro.bench_env("/tree", {"PYTHONPATH": "/stale", "OMP_NUM_THREADS": "4"})
    assert env["ASV_PYTHONPATH"] == env["SPACEGRAPH_BENCH_ROOT"] == "/tree" and "PYTHONPATH" not in env
    assert env["OMP_NUM_THREADS"] == "4" and env["TF_NUM_INTRAOP_THREADS"] == "1"  # set values win over defaults


# ---- trees, worktrees, configs --------------------------------------------------------------------------------


def test_skip_reason(tmp_path):
    assert "did not exist yet" in ro.skip_reason(str(tmp_path))
    bench = tmp_path / "asv_bench" / "benchmarks"
    bench.mkdir(parents=True)
    (bench / "__init__.py").write_text("")
    assert "holds no benchmark modules" in ro.skip_reason(str(tmp_path))
    (bench / "x.py").write_text("")
    assert ro.skip_reason(str(tmp_path)) is None


def test_worktree_checks_out_the_commit_and_is_removed(toy_repo):
    repo, shas = toy_repo
    with ro.worktree(shas[1], repo=str(repo)) as tree:
        assert Path(tree, "harness", "__init__.py").read_text() == "VALUE = 1\n"
        assert tree in _git(repo, "worktree", "list")
    assert not Path(tree).exists() and tree not in _git(repo, "worktree", "list")
    with pytest.raises(KeyError):
        with ro.worktree(shas[0], repo=str(repo)) as tree:
            raise KeyError("boom")
    assert not Path(tree).exists() and tree not in _git(repo, "worktree", "list")


def test_write_config_makes_paths_absolute(tmp_path):
    out = ro.write_config(str(tmp_path / "c.json"), benchmark_dir="/t/b", results_dir="/r", html_dir="/h", repo="/repo")
    conf = json.loads(Path(out).read_text())
    assert (conf["benchmark_dir"], conf["results_dir"], conf["html_dir"], conf["repo"]) == ("/t/b", "/r", "/h", "/repo")
    assert conf["environment_type"] == "existing" and conf["branches"] == ["main"]
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ro.RunnerError, match="cannot read the asv config .*bad.json"):
        ro.write_config(str(tmp_path / "c2.json"), benchmark_dir="b", results_dir="r", html_dir="h",
                        base=str(tmp_path / "bad.json"))


def test_imported_from_refuses_a_copy_outside_the_tree(tmp_path):
    tree, stale = tmp_path / "tree", tmp_path / "stale"
    for root in (tree, stale):
        (root / "harness").mkdir(parents=True)
        (root / "harness" / "__init__.py").write_text("")
    assert ro.imported_from(str(tree)) == str(tree / "harness" / "__init__.py")
    # An interpreter that finds another copy first (as an installed sdist would if PYTHONPATH were lost).
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nPYTHONPATH="{stale}:$PYTHONPATH" exec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    with pytest.raises(ro.RunnerError, match=f"harness is imported from {stale}.*not from the tree under test {tree}"):
        ro.imported_from(str(tree), python=str(python))
    # An interpreter that sees neither PYTHONPATH nor site-packages finds no harness at all.
    bare = tmp_path / "bare-python"
    bare.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S -E "$@"\n')
    bare.chmod(0o755)
    with pytest.raises(ro.RunnerError, match=f"(?s)cannot import harness from {tree}: .*ModuleNotFoundError"):
        ro.imported_from(str(tree), python=str(bare))
    with pytest.raises(ro.RunnerError, match="cannot run .*no-such-python"):
        ro.imported_from(str(tree), python=str(tmp_path / "no-such-python"))


def test_benchmark_package_refuses_harness_from_elsewhere(tmp_path):
    code = "import sys; sys.path.insert(0, 'asv_bench'); import benchmarks"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SPACEGRAPH_BENCH_ROOT": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode != 0
    assert "not from the tree under test" in proc.stderr and str(tmp_path) in proc.stderr
    env["SPACEGRAPH_BENCH_ROOT"] = str(ROOT)
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True, capture_output=True)


def test_check_machine_refuses_other_hardware(tmp_path):
    facts = {"arch": "x86_64", "cpu": "AMD EPYC", "num_cpu": "2", "os": "Linux", "ram": "1"}
    ro.check_machine(str(tmp_path), "m", facts)  # nothing recorded yet
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "machine.json").write_text(json.dumps({**facts, "ram": "2", "version": 1}))
    ro.check_machine(str(tmp_path), "m", facts)  # RAM may drift
    with pytest.raises(ro.RunnerError, match="num_cpu: recorded '2', this machine '16'.*--machine NAME"):
        ro.check_machine(str(tmp_path), "m", {**facts, "num_cpu": "16"})


def test_dashboard_is_served_on_loopback_only(tmp_path):
    with pytest.raises(ro.RunnerError, match="no dashboard in"):
        ro.make_server(str(tmp_path), 0)
    (tmp_path / "index.html").write_text("<html>dashboard</html>")
    with ro.make_server(str(tmp_path), 0) as httpd:
        assert httpd.server_address[0] == "127.0.0.1"
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        try:
            url = f"http://127.0.0.1:{httpd.server_address[1]}/index.html"
            assert urllib.request.urlopen(url, timeout=10).read() == b"<html>dashboard</html>"
        finally:
            httpd.shutdown()
            thread.join(10)


# ---- end to end on the toy repository ---------------------------------------------------------------------------


needs_asv = pytest.mark.skipif(importlib.util.find_spec("asv") is None,
                               reason="asv is not installed (the bench extra: tox -e bench runs it)")


def _run(repo: Path, home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPACEGRAPH_BENCH_ROOT")}
    env["HOME"] = str(home)  # asv machine writes ~/.asv-machine.json
    return subprocess.run([sys.executable, str(repo / "asv_bench" / "run_offline.py"), "--machine", "toy", *args],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=300)


def _tracked(results: Path) -> dict[str, object]:
    """commit hash -> the value recorded for value.Value.track_value (None: failed)."""
    found = {}
    for path in (results / "toy").glob("*.json"):
        if path.name == "machine.json":
            continue
        data = json.loads(path.read_text())
        columns = data["result_columns"]
        found[data["commit_hash"]] = data["results"]["value.Value.track_value"][columns.index("result")]
    return found


@needs_asv
def test_each_commit_runs_in_its_own_worktree(toy_repo, tmp_path):
    repo, shas = toy_repo
    results = tmp_path / "results"
    proc = _run(repo, tmp_path, "--commits", *shas, "--results-dir", str(results), "--html-dir", str(tmp_path / "html"))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out  # the broken commit fails the run ...
    assert f"skip {shas[0][:8]}" in out and "did not exist yet" in out
    assert "benchmarks failed for:" in out and "broken benchmark" in out.split("benchmarks failed for:")[1]
    tracked = _tracked(results)
    # ... and each other commit measured its own tree: a stale or shared copy would give equal values.
    assert tracked[shas[1]] == [1.0] and tracked[shas[2]] == [2.0] and tracked[shas[3]] in (None, [None])
    assert shas[0] not in tracked
    assert _git(repo, "worktree", "list").count("\n") == 0  # every worktree removed
    assert json.loads((results / "toy" / "machine.json").read_text())["machine"] == "toy"
    assert (tmp_path / "html" / "index.html").exists()  # published


@needs_asv
def test_quick_run_leaves_the_results_dir_alone(toy_repo, tmp_path):
    repo, shas = toy_repo
    proc = _run(repo, tmp_path, "--quick", "--commits", shas[2])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "value.Value.track_value" in proc.stdout
    assert not (repo / "asv_bench" / "results").exists() and not (repo / "asv_bench" / "html").exists()
