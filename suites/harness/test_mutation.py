"""The mutation tester (`harness.testing.mutation`, `mutation_run`) on a tiny planted module."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from harness.testing.mutation import Mutant, Outcome, mutants, mutated_source, run_mutant
from harness.testing.mutation_run import clopper_pearson, report_markdown

TINY = '''"""A tiny module: its docstring, assert and raise are never mutated."""


def clip(x, lo=0, hi=10):
    assert lo <= hi
    if x < lo:
        return lo
    if x > hi and not False:
        return hi
    return x * 1


def total(values):
    if not values:
        raise ValueError("no values")
    s = 0
    for v in values:
        s += v
    return s
'''


def namespace(source: str) -> dict:
    scope: dict = {}
    exec(compile(source, "tiny", "exec"), scope)
    return scope


def test_mutants_cover_each_operator_and_leave_docstrings_asserts_raises() -> None:
    found = mutants(TINY)
    assert {m.operator for m in found} == {"arith", "compare", "bool", "not", "constant", "statement", "return"}
    assert [m.index for m in found] == list(range(len(found)))
    assert not any(m.line in (1, 5, 15) for m in found)           # docstring, assert, raise
    assert any(m.what == "Lt -> LtE" and m.line == 6 for m in found)
    assert any(m.what == "Add -> Sub" and m.line == 18 for m in found)


def test_every_mutant_compiles_and_most_change_behaviour() -> None:
    original = namespace(TINY)
    probes = [(-1,), (0,), (5,), (10,), (11,)]
    changed = 0
    for m in mutants(TINY):
        scope = namespace(mutated_source(TINY, m.index))
        try:
            differs = any(scope["clip"](*p) != original["clip"](*p) for p in probes) or \
                scope["total"]([1, 2, 3]) != original["total"]([1, 2, 3])
        except Exception:
            differs = True
        changed += differs
    assert changed >= len(mutants(TINY)) - 3  # `not False` -> `False` and `x * 1` -> `x / 1` are equivalent
    with pytest.raises(IndexError, match="no mutant"):
        mutated_source(TINY, 10_000)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "tinypkg").mkdir()
    (tmp_path / "tinypkg" / "__init__.py").write_text("")
    (tmp_path / "tinypkg" / "tiny.py").write_text(TINY)
    (tmp_path / "test_strong.py").write_text(
        "from tinypkg.tiny import clip, total\n\n\ndef test_it():\n"
        "    assert [clip(v) for v in (-1, 0, 5, 10, 11)] == [0, 0, 5, 10, 10] and total([1, 2, 3]) == 6\n")
    (tmp_path / "test_weak.py").write_text(
        "from tinypkg.tiny import clip\n\n\ndef test_it():\n    clip(5)\n")
    return tmp_path


def run(project: Path, index: int, test: str) -> str:
    repo = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(project), repo])}
    return run_mutant("tinypkg.tiny", str(project / "tinypkg" / "tiny.py"), index,
                      ["-q", "-p", "no:cacheprovider", test], timeout=60, env=env, cwd=str(project))


def test_a_strong_test_kills_and_a_weak_test_lets_survive(project: Path) -> None:
    add = next(m.index for m in mutants(TINY) if m.what == "Add -> Sub")
    assert run(project, add, "test_strong.py") == "killed"
    assert run(project, add, "test_weak.py") == "survived"
    assert (project / "tinypkg" / "tiny.py").read_text() == TINY   # the file on disk never changes


def test_a_selection_that_runs_no_test_is_an_error_not_a_kill(project: Path) -> None:
    add = next(m.index for m in mutants(TINY) if m.what == "Add -> Sub")
    with pytest.raises(RuntimeError, match=r"pytest exited 4 \(usage error\) for mutant .* of tinypkg.tiny"):
        run(project, add, "test_missing.py")
    (project / "test_empty.py").write_text("from tinypkg.tiny import clip  # noqa: F401\n")
    with pytest.raises(RuntimeError, match=r"pytest exited 5 \(no tests collected\)"):
        run(project, add, "test_empty.py")


def test_clopper_pearson_and_sample_report() -> None:
    lo, hi = clopper_pearson(9, 10)
    assert lo == pytest.approx(0.5550, abs=1e-4) and hi == pytest.approx(0.9975, abs=1e-4)
    assert clopper_pearson(10, 10)[1] == 1.0 and clopper_pearson(0, 10)[0] == 0.0
    outs = [Outcome("m", Mutant(0, 3, "arith", "Add -> Sub", "f:arith:a + b -> a - b"), "killed", 1.0),
            Outcome("m", Mutant(1, 4, "constant", "1 -> 2", "f:constant:a + 1 -> a + 2"), "survived", 1.0),
            Outcome("m", Mutant(2, 5, "compare", "Lt -> LtE", "f:compare:x < lo -> x <= lo"), "survived", 1.0)]
    text = report_markdown(outs, 50, True, 7, "--sample 3", {"m:f:compare:x < lo -> x <= lo": "x is never lo there",
                                                              "m:2": "an index names no mutant"})
    assert "**This is a random sample** of 3 of the 50 mutants (seed 7, drawn in random order" in text
    assert "| 3 | 1 | 1 | 1 | 50.0% |" in text
    assert "not explained: needs a check" in text and "x is never lo there" in text
    assert "`m:f:constant:a + 1 -> a + 2` | not explained" in text


def test_named_mutants_run_and_a_selection_failing_unmutated_stops_the_run(
        project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    from harness.testing.mutation_run import main

    repo = str(Path(__file__).resolve().parents[2])
    monkeypatch.chdir(project)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(project), repo]))
    add = next(m.index for m in mutants(TINY) if m.what == "Add -> Sub")
    out = str(tmp_path / "named")
    assert main(["--package-dir", "tinypkg", "--tests", "test_strong.py", "--out", out,
                 "--mutants", f"tinypkg.tiny:{add}"]) == 0
    report = Path(out + ".md").read_text()
    assert "The 1 mutants named by `--mutants` ran" in report and "not a random sample" in report
    assert "| 1 | 0 | 1 | 0 | 100.0% |" in report
    assert "| tf | 0 | 0 |" in report and "killed only by tf: 0 of the 0 mutants torch let survive" in report
    assert "killed only by torch: not measured (tf did not run the 1 mutants torch killed" in report
    with pytest.raises(SystemExit):
        main(["--package-dir", "tinypkg", "--out", out, "--mutants", "tinypkg.tiny:100000"])
    assert "no such mutant(s) ['tinypkg.tiny:100000']" in capsys.readouterr().err
    # a test that fails on the unchanged code would "kill" every mutant: the run refuses to measure with it
    (project / "test_broken.py").write_text("from tinypkg.tiny import clip\n\n\ndef test_it():\n"
                                            "    assert clip(5) == 6\n")
    assert main(["--package-dir", "tinypkg", "--tests", "test_broken.py", "--out", out,
                 "--mutants", f"tinypkg.tiny:{add}"]) == 2
    assert "does not pass on the unmutated code with SPACEGRAPH_BACKENDS=torch (killed after" in capsys.readouterr().err


def test_mutation_covers_selects_test_files_without_importing_them(tmp_path: Path) -> None:
    from harness.testing.mutation_run import covering_tests, declared_covers

    (tmp_path / "sub").mkdir()
    (tmp_path / "test_a.py").write_text('raise SystemExit("never imported")\nMUTATION_COVERS = ("pkg.a", "pkg.b")\n')
    (tmp_path / "sub" / "test_b.py").write_text('MUTATION_COVERS = ("pkg.b",)\n')
    (tmp_path / "test_c.py").write_text("def test_it():\n    pass\n")
    assert sorted(covering_tests("pkg.b", tmp_path)) == ["test_a", "test_b"]
    assert covering_tests("pkg.a", tmp_path) == ["test_a"] and covering_tests("pkg.c", tmp_path) == []
    (tmp_path / "test_d.py").write_text('MUTATION_COVERS = "pkg.a"\n')  # a string, not a tuple: refused
    with pytest.raises(ValueError, match="MUTATION_COVERS must be a tuple"):
        declared_covers(tmp_path / "test_d.py")


def test_this_repositorys_selections() -> None:
    """A base class's mutants run its subclasses' specs; a host helper's run the test files that declare it."""
    from harness.testing.mutation_run import selection

    repo = Path(__file__).resolve().parents[2]
    tests, specs = repo / "suites" / "components", repo / "specs" / "components"
    assert "optimizer_adam" in selection("reference_agents.components.optimizers.base", tests, specs)
    host = selection("reference_agents.components.memories.host_frame_replay", tests, specs)
    assert "test_host_frame_replay" in host and all(stem.startswith("test_") for stem in host)  # test files only
    assert "test_queues" in selection("reference_agents.components.queues.blocking", tests, specs)


def test_a_module_changed_during_the_run_stops_it(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture) -> None:
    from harness.testing import mutation_run

    monkeypatch.chdir(project)
    add = next(m.index for m in mutants(TINY) if m.what == "Add -> Sub")

    def edit_then_run(*args: object, **kwargs: object) -> tuple[str, float]:
        (project / "tinypkg" / "tiny.py").write_text(TINY + "\n# edited\n")
        return "killed", 0.0

    monkeypatch.setattr(mutation_run, "run_unmutated", lambda *a, **k: "survived")
    monkeypatch.setattr(mutation_run, "timed", edit_then_run)
    args = ["--package-dir", "tinypkg", "--tests", "test_strong.py", "--out", str(tmp_path / "r"),
            "--mutants", f"tinypkg.tiny:{add}", f"tinypkg.tiny:{add}"]
    assert mutation_run.main(args) == 2
    assert "tiny.py changed since the run started" in capsys.readouterr().err


def test_each_backend_runs_the_survivors_of_the_ones_before(project: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture) -> None:
    """A test that only checks on TF: torch lets the mutant survive, TF kills it, and the report says so."""
    import json

    from harness.testing.mutation_run import main

    repo = str(Path(__file__).resolve().parents[2])
    monkeypatch.chdir(project)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(project), repo]))
    (project / "test_tf_only.py").write_text(
        "import os\n\nfrom tinypkg.tiny import total\n\n\ndef test_it():\n"
        "    assert os.environ['SPACEGRAPH_BACKENDS'] != 'tf' or total([1, 2, 3]) == 6\n")
    add = next(m for m in mutants(TINY) if m.what == "Add -> Sub")
    out = str(tmp_path / "tf_only")
    assert main(["--package-dir", "tinypkg", "--tests", "test_tf_only.py", "--out", out,
                 "--mutants", f"tinypkg.tiny:{add.key}"]) == 0   # a content key, default backends torch,tf
    outcome = json.loads(Path(out + ".json").read_text())["outcomes"][0]
    assert outcome["backends"] == {"torch": "survived", "tf": "killed"} and outcome["killed_by"] == "tf"
    assert outcome["status"] == "killed" and outcome["mutant"]["key"] == add.key
    report = Path(out + ".md").read_text()
    assert "| tf | 1 | 1 |" in report and "| torch | 1 | 0 |" in report
    assert "killed only by tf: 1" in report and "killed only by torch: 0" in report  # it ran on both
    # torch only: the same mutant survives, and the report has no TF row
    assert main(["--package-dir", "tinypkg", "--tests", "test_tf_only.py", "--out", out, "--backends", "torch",
                 "--mutants", f"tinypkg.tiny:{add.index}"]) == 0
    assert json.loads(Path(out + ".json").read_text())["outcomes"][0]["backends"] == {"torch": "survived"}
    assert "| tf |" not in Path(out + ".md").read_text()
    # --render writes the report again from the JSON with a newer equivalent file, running nothing
    eq = tmp_path / "eq.json"
    eq.write_text(json.dumps({f"tinypkg.tiny:{add.key}": "shown equivalent later"}))
    assert main(["--package-dir", "tinypkg", "--out", out, "--render", "--equivalent", str(eq)]) == 0
    rendered = Path(out + ".md").read_text()
    assert "| 1 | 1 | 0 | 0 |" in rendered and "shown equivalent later" in rendered and "--backends torch" in rendered
    with pytest.raises(SystemExit):
        main(["--package-dir", "tinypkg", "--out", str(tmp_path / "missing"), "--render"])
    assert f"--render: expected {tmp_path / 'missing'}.json as written by a run" in capsys.readouterr().err
    # --every-backend runs TF even after torch killed it; strong tests kill on both, so neither kills alone
    assert main(["--package-dir", "tinypkg", "--tests", "test_strong.py", "--out", out, "--every-backend",
                 "--mutants", f"tinypkg.tiny:{add.key}"]) == 0
    assert json.loads(Path(out + ".json").read_text())["outcomes"][0]["backends"] == {"torch": "killed",
                                                                                      "tf": "killed"}
    assert "killed only by torch: 0" in Path(out + ".md").read_text()
    # the selection must pass unmutated on every backend named, not only the first
    (project / "test_fails_on_tf.py").write_text("import os\n\n\ndef test_it():\n"
                                                 "    assert os.environ['SPACEGRAPH_BACKENDS'] != 'tf'\n")
    assert main(["--package-dir", "tinypkg", "--tests", "test_fails_on_tf.py", "--out", out,
                 "--mutants", f"tinypkg.tiny:{add.key}"]) == 2
    assert "does not pass on the unmutated code with SPACEGRAPH_BACKENDS=tf (killed after" in capsys.readouterr().err
    for bad in ("jax", "tf,tf", ""):
        with pytest.raises(SystemExit):
            main(["--package-dir", "tinypkg", "--out", out, "--backends", bad, "--mutants", f"tinypkg.tiny:{add.key}"])
        assert "--backends: expected a comma list of distinct backends from ['tf', 'torch']" in capsys.readouterr().err


def test_a_bad_equivalent_file_is_one_clear_error_and_stale_keys_are_named(
        project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    from harness.testing.mutation_run import main

    monkeypatch.chdir(project)
    add = next(m for m in mutants(TINY) if m.what == "Add -> Sub")
    eq = tmp_path / "eq.json"
    eq.write_text("[1, 2]")
    with pytest.raises(SystemExit):
        main(["--package-dir", "tinypkg", "--out", str(tmp_path / "r"), "--equivalent", str(eq),
              "--mutants", f"tinypkg.tiny:{add.key}"])
    assert f"--equivalent {eq}: expected a JSON object {{key: why}} of strings, got list" in capsys.readouterr().err
    eq.write_text('{"tinypkg.tiny:clip:compare:x < 0 -> x <= 0": "gone"}')
    monkeypatch.setattr("harness.testing.mutation_run.run_unmutated", lambda *a, **k: "survived")
    monkeypatch.setattr("harness.testing.mutation_run.timed", lambda *a, **k: ("killed", 0.0))
    assert main(["--package-dir", "tinypkg", "--out", str(tmp_path / "r"), "--equivalent", str(eq),
                 "--mutants", f"tinypkg.tiny:{add.key}"]) == 0
    assert "1 key(s) of" in capsys.readouterr().err


def test_resume_keeps_the_outcomes_and_limits_follow_the_unmutated_time(
        project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    import json

    from harness.testing import mutation_run

    monkeypatch.chdir(project)
    found = mutants(TINY)
    limits: list[dict[str, float]] = []

    def fake_run(module: str, path: str, index: int, pytest_args: list, timeouts: dict, backends: list,
                 every: bool) -> tuple[dict[str, str], float]:
        limits.append(dict(timeouts))
        return {b: "survived" for b in backends}, 0.0

    monkeypatch.setattr(mutation_run, "run_on_backends", fake_run)
    monkeypatch.setattr(mutation_run, "baseline_run", lambda args, timeout, env: ("survived", 100.0))
    out = str(tmp_path / "r")
    named = ["--package-dir", "tinypkg", "--out", out, "--timeout", "90", "--mutants"]
    assert mutation_run.main([*named, f"tinypkg.tiny:{found[0].key}"]) == 0
    assert limits == [{"torch": 300.0, "tf": 300.0}]   # 3x the unmutated selection's 100 s, above --timeout
    capsys.readouterr()
    assert mutation_run.main([*named, f"tinypkg.tiny:{found[0].key}", f"tinypkg.tiny:{found[1].key}",
                              "--resume"]) == 0
    assert len(limits) == 2 and "[1/2]" not in capsys.readouterr().out     # the first mutant was not run again
    assert [o["mutant"]["index"] for o in json.loads(Path(out + ".json").read_text())["outcomes"]] == [0, 1]
    monkeypatch.setattr(mutation_run, "baseline_run", lambda args, timeout, env: ("survived", 1.0))
    assert mutation_run.main([*named, f"tinypkg.tiny:{found[2].key}", "--resume"]) == 0
    assert limits[-1] == {"torch": 90.0, "tf": 90.0}
    with pytest.raises(SystemExit):   # a sample is not the run of named mutants that OUT.json holds
        mutation_run.main(["--package-dir", "tinypkg", "--out", out, "--sample", "2", "--resume"])
    assert "--resume: " in capsys.readouterr().err
