"""`spacegraph spec validate` and `spec schema`: the repository's specs, and a table of broken spec files."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.specs import ComponentSpec, SpecError, find_specs, load_spec
from harness.specs.cli import add_spec_parser, collect_spec_files, schema_text, validate

REPO = Path(__file__).resolve().parents[2]
SPEC_FILES = find_specs(REPO / "specs")
AGENT_SPEC_FILES = find_specs(REPO / "specs", "agents")
SCHEMA_LINE = "# yaml-language-server: $schema=../schema.json"

GOOD: dict[str, Any] = {
    "component": "reference_agents.components.common.Dense",
    "config": {"units": 2},
    "input_spaces": {"inputs": "float32[B,3]"},
    "methods": {"apply": {"output_space": "float32[B,2]", "oracle": "reference_agents.oracles.common.dense_apply"}},
}


def run_cli(argv: list[str]) -> int:
    """Parses ``argv`` the way `spacegraph.cli.main` does once the spec parser is wired in, and runs it."""
    parser = argparse.ArgumentParser(prog="spacegraph")
    add_spec_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.fn(args)


def validate_text(*paths: Any) -> tuple[int, str]:
    out = io.StringIO()
    code = validate([str(p) for p in paths], out)
    return code, out.getvalue()


# ---- the repository's specs ------------------------------------------------------------------------


def test_the_repository_has_component_specs() -> None:
    assert len(SPEC_FILES) >= 6


@pytest.mark.parametrize("path", SPEC_FILES, ids=[Path(p).stem for p in SPEC_FILES])
def test_every_spec_validates(path: str) -> None:
    code, text = validate_text(path)
    assert code == 0, text
    assert f"{path}: OK" in text


@pytest.mark.parametrize("path", SPEC_FILES, ids=[Path(p).stem for p in SPEC_FILES])
def test_every_spec_names_the_schema_for_editors(path: str) -> None:
    assert Path(path).read_text().splitlines()[0] == SCHEMA_LINE


def test_schema_json_is_up_to_date() -> None:
    committed = (REPO / "specs" / "schema.json").read_text()
    assert committed == schema_text(), "specs/schema.json is stale: run `spacegraph spec schema --out specs/schema.json`"
    assert json.loads(committed) == ComponentSpec.model_json_schema()


def test_schema_command_prints_and_writes(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert run_cli(["spec", "schema"]) == 0
    assert json.loads(capsys.readouterr().out) == ComponentSpec.model_json_schema()
    target = tmp_path / "schema.json"
    assert run_cli(["spec", "schema", "--out", str(target)]) == 0
    assert target.read_text() == schema_text()
    assert str(target) in capsys.readouterr().out


def test_validate_command_defaults_to_specs(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(REPO)
    assert run_cli(["spec", "validate"]) == 0
    out = capsys.readouterr().out
    assert out.count(": OK") == len(SPEC_FILES) + len(AGENT_SPEC_FILES) and AGENT_SPEC_FILES
    assert f"{len(SPEC_FILES) + len(AGENT_SPEC_FILES)} spec file(s) checked, 0 with problems" in out


# ---- broken spec files -------------------------------------------------------------------------------


def good(**changes: Any) -> dict[str, Any]:
    """A copy of GOOD with top-level keys replaced (None deletes)."""
    spec = json.loads(json.dumps(GOOD))
    for key, value in changes.items():
        if value is None:
            spec.pop(key, None)
        else:
            spec[key] = value
    return spec


def with_method(**fields: Any) -> dict[str, Any]:
    return good(methods={"apply": {**GOOD["methods"]["apply"], **fields}})


# (id, file content: a dict dumped as YAML or raw text, key path, fragment of the message)
BAD = [
    ("unknown-key-nested", with_method(oracel="x"), "methods.apply.oracel", "unknown key (got 'x')"),
    ("unknown-key-top", good(compnent="x"), "compnent", "unknown key"),
    ("bad-space-text", good(input_spaces={"inputs": "float32[B,3"}), "input_spaces.inputs", "bad space"),
    ("bad-output-space", with_method(output_space="float33[B,2]"), "methods.apply.output_space",
     "unknown dtype 'float33'"),
    ("bad-bad-space", good(bad_spaces=[{"inputs": "int64[B"}]), "bad_spaces.0.inputs", "bad space"),
    ("class-does-not-import", good(component="reference_agents.nowhere.Dense"), "component",
     "class does not import: cannot import module 'reference_agents.nowhere'"),
    ("class-missing-in-module", good(component="reference_agents.components.common.Dens"), "component",
     "has no attribute 'Dens'"),
    ("not-a-component", good(component="harness.spaces.FloatBox"), "component",
     "harness.spaces.FloatBox is not a spacegraph Component class"),
    ("undeclared-method", good(methods={"forward": {}}), "methods.forward",
     "Dense declares no API method 'forward'; it declares ['apply']"),
    ("oracle-does-not-import", with_method(oracle="reference_agents.oracles.common.no_such_oracle"),
     "methods.apply.oracle", "oracle does not import"),
    ("model-does-not-import", good(stateful={"model": "reference_agents.oracles.common.NoModel", "methods": ["apply"]}),
     "stateful.model", "model does not import"),
    ("stateful-undeclared-method", good(stateful={"model": "reference_agents.oracles.common.SyncedPairModel",
                                                  "methods": ["apply", "sync"]}),
     "stateful.methods.1", "declares no API method 'sync'"),
    ("space-for-unknown-argument", good(input_spaces={"inputs": "float32[B,3]", "mask": "bool[B]"}),
     "input_spaces.mask", "no exercised API method takes an argument 'mask'"),
    ("missing-space", good(input_spaces={}), "input_spaces", "no space for argument 'inputs'"),
    ("missing-required-key", good(methods=None), "methods", "required key is missing"),
    ("no-methods", good(methods={}), "<top>", "give at least one API method"),
    ("bad-tolerance", good(tolerance={"rtol": -1}), "tolerance.rtol", "greater than or equal to 0 (got -1)"),
    ("bad-backend", good(backends=["jax"]), "backends.0", "'tf' or 'torch'"),
    ("not-a-mapping", "- component\n- methods\n", "<top>", "expected a mapping at the top, got list"),
    ("invalid-yaml", "component: [\n", "<top>", "not valid YAML"),
    ("empty-file", "", "<top>", "expected a mapping at the top, got NoneType"),
    # checks `spec validate` adds to load_spec
    ("config-unknown-argument", good(config={"unit": 2}), "config", "does not fit Dense(units, activation"),
    ("config-rejected-value", good(config={"units": 0}), "config",
     "Dense(**config) raised ValueError: Dense: units must be a positive int; got 0"),
    ("stateful-method-not-under-methods",
     good(component="reference_agents.oracles.fixtures.SyncedPair", methods={"source": {}},
          stateful={"model": "reference_agents.oracles.common.SyncedPairModel", "methods": ["source", "sync"]}),
     "stateful.methods.1", "'sync' is not under methods"),
    ("deterministic-input-unknown-argument", with_method(deterministic_inputs={"explore": False}),
     "methods.apply.deterministic_inputs.explore", "not an argument of 'apply' (expected one of ['inputs'])"),
    ("bad-space-unknown-argument", good(bad_spaces=[{"mask": "bool[B]"}]), "bad_spaces.0.mask",
     "not an argument in input_spaces"),
]


def write(tmp_path: Path, name: str, content: Any) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(content if isinstance(content, str) else yaml.safe_dump(content, sort_keys=False))
    return path


@pytest.mark.parametrize("content, key_path, fragment", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_spec_is_located(tmp_path: Path, content: Any, key_path: str, fragment: str) -> None:
    path = write(tmp_path, "bad", content)
    code, text = validate_text(path)
    assert code == 1
    lines = [line for line in text.splitlines() if line.startswith(f"{path}: {key_path}: ")]
    assert lines, f"no problem reported at {key_path!r}:\n{text}"
    assert any(fragment in line for line in lines), f"{fragment!r} not in:\n{text}"
    assert "1 spec file(s) checked, 1 with problems" in text


def test_load_spec_error_names_file_and_key_path(tmp_path: Path) -> None:
    path = write(tmp_path, "bad", with_method(oracel="x"))
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert info.value.file == str(path)
    assert ("methods.apply.oracel", "unknown key (got 'x')") in info.value.problems
    assert str(path) in str(info.value)


def test_good_spec_passes(tmp_path: Path) -> None:
    code, text = validate_text(write(tmp_path, "good", good()))
    assert code == 0, text
    assert text.splitlines()[0].endswith("good.yaml: OK")


def test_every_problem_of_a_file_is_listed(tmp_path: Path) -> None:
    content = good(component="harness.spaces.FloatBox",
                   methods={"apply": {"oracle": "reference_agents.oracles.common.no_such_oracle"}})
    code, text = validate_text(write(tmp_path, "two", content))
    assert code == 1
    assert ": component: " in text and ": methods.apply.oracle: " in text


def test_multiline_messages_stay_indented(tmp_path: Path) -> None:
    code, text = validate_text(write(tmp_path, "bad", good(input_spaces={"inputs": "float32[B,3"})))
    assert code == 1
    problem_lines = text.splitlines()[:-1]
    assert all(line.startswith(str(tmp_path)) or line.startswith("    ") for line in problem_lines), text


def test_validate_folder_mixes_good_and_bad(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    components = tmp_path / "specs" / "components"
    components.mkdir(parents=True)
    write(components, "fine", good())
    write(components, "broken", good(component="reference_agents.nowhere.Dense"))
    assert run_cli(["spec", "validate", str(tmp_path / "specs")]) == 1
    out = capsys.readouterr().out
    assert f"{components / 'fine.yaml'}: OK" in out
    assert f"{components / 'broken.yaml'}: component: class does not import" in out
    assert "2 spec file(s) checked, 1 with problems" in out


def test_validate_good_files_exit_zero(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    a, b = write(tmp_path, "a", good()), write(tmp_path, "b", good(config={"units": 5, "activation": "tanh"}))
    assert run_cli(["spec", "validate", str(a), str(b)]) == 0
    assert "2 spec file(s) checked, 0 with problems" in capsys.readouterr().out


def test_validate_missing_path_and_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    code, text = validate_text(tmp_path / "nothing.yaml", tmp_path / "empty")
    assert code == 1
    assert f"{tmp_path / 'nothing.yaml'}: no such file or folder" in text
    assert f"{tmp_path / 'empty'}: the folder holds no *.yaml or *.yml spec files" in text


def test_collect_spec_files_deduplicates(tmp_path: Path) -> None:
    path = write(tmp_path, "a", good())
    files, problems = collect_spec_files([str(path), str(tmp_path), str(path)])
    assert files == [str(path)] and problems == []


def test_spec_command_needs_a_subcommand() -> None:
    with pytest.raises(SystemExit):
        run_cli(["spec"])


def test_validate_reports_a_broken_agent_spec(tmp_path, capsys: pytest.CaptureFixture) -> None:
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "bad.yaml").write_text("agent: reference_agents.agents.DQNAgent\nconfig: x.yaml\napi: {act: 'int64[B'}\n")
    assert run_cli(["spec", "validate", str(folder / "bad.yaml")]) == 1
    out = capsys.readouterr().out
    assert "bad.yaml: config: no such file" in out and "bad.yaml: api.act:" in out
