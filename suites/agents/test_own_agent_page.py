"""The docs page "Your own agent" (docs/tutorials/own_agent.md), followed as written: its code blocks are copied
into a fresh folder (each block's first line names its file) and its commands run through `spacegraph train`.
Also the registry's refusals of agents that do not fit."""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from pathlib import Path

import pytest

from reference_agents.agents import AGENTS, ConfigError, agent_kind, build_agent, load_checkpoint
from reference_agents.agents.base import Agent
from spacegraph.cli import main

PAGE = Path(__file__).resolve().parents[2] / "docs" / "tutorials" / "own_agent.md"
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)


def page_blocks() -> list[tuple[str, str]]:
    return [(lang, body) for lang, body in BLOCK.findall(PAGE.read_text(encoding="utf-8"))]


@pytest.fixture
def project(tmp_path, monkeypatch):
    """The page's files written into ``tmp_path`` (the current folder); its module forgotten afterwards."""
    for lang, body in page_blocks():
        first = body.splitlines()[0]
        if lang in ("python", "yaml"):
            name = first.lstrip("# ").strip()
            assert re.fullmatch(r"[\w.]+\.(py|yaml)", name), f"{PAGE}: a {lang} block must start with '# FILE'"
            (tmp_path / name).write_text(body, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    forget_the_page_agent()
    sys.path[:] = [p for p in sys.path if p != str(tmp_path)]


def forget_the_page_agent() -> None:
    sys.modules.pop("my_agents", None)
    for name in [n for n in AGENTS if n.startswith("my_agents")]:
        AGENTS.pop(name)


def test_the_page_trains_stops_and_resumes_its_agent(project, capsys):
    commands = [shlex.split(line) for lang, body in page_blocks() if lang == "bash"
                for line in body.splitlines() if line.startswith("spacegraph ")]
    assert len(commands) == 2, commands
    for argv in commands:
        assert main(argv[1:]) == 0, capsys.readouterr().err
        forget_the_page_agent()  # the resume, like a new process, finds the class from the checkpoint alone
    run = project / "runs" / "bandit"
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["env_steps"] for r in rows] == [200, 400, 600]
    assert all(r["epsilon"] is None and r["eval_episodes"] == 3 for r in rows)
    assert sorted(os.listdir(run / "checkpoint")) == ["agent_state.npz", "trainer.json", "worker.json"]
    assert os.listdir(run / "tensorboard")
    agent = load_checkpoint(str(run / "checkpoint"))  # found again by the dotted path its saved config names
    assert type(agent).__name__ == "BanditAgent" and agent.timesteps == 600 and isinstance(agent, Agent)
    assert agent.counts.sum() == 600 + 2  # every observed action, plus the prior count of one per action


def test_the_registry_builds_the_page_agent_by_its_dotted_path(project):
    sys.path.insert(0, str(project))
    assert agent_kind("bandit_cartpole.yaml") == "my_agents:BanditAgent"
    agent = build_agent("bandit_cartpole.yaml", seed=5)
    assert agent.seed == 5 and agent.config.temperature == 0.5


@pytest.mark.parametrize("name, message", [
    ("no_such_module:Agent", "cannot import module 'no_such_module'"),
    ("json:NoSuchClass", "module 'json' has no attribute 'NoSuchClass'"),
    ("json:dumps", "is not a class"),
    ("json:JSONDecoder", "needs a config_class attribute"),
    ("dqn2", "must be one of ['apex', 'dqn', 'impala'] or the dotted path"),
])
def test_an_agent_key_that_names_no_agent_is_a_located_config_error(tmp_path, name, message):
    path = tmp_path / "bad.yaml"
    path.write_text(f"agent: {name}\nenv: {{id: CartPole-v1}}\n")
    with pytest.raises(ConfigError) as err:
        build_agent(str(path))
    assert str(path) in str(err.value) and "agent:" in str(err.value) and message in str(err.value), str(err.value)


def test_the_built_in_agents_satisfy_the_protocol_and_apex_is_refused_by_build_agent(tmp_path):
    for entry in AGENTS.values():
        if entry.agent_class is not None:
            missing = [m for m in ("get_actions", "observe", "update_on_schedule", "epsilon", "get_weights",
                                   "set_weights", "save_checkpoint", "load_checkpoint")
                       if not callable(getattr(entry.agent_class, m, None))]
            assert not missing, (entry.name, missing)
            assert entry.agent_class.config_class is entry.model()
    with pytest.raises(ConfigError, match="distributed driver"):
        build_agent("apex_cartpole")
    from reference_agents.training.apex import APEX_STATE

    assert AGENTS["apex"].run_marker == APEX_STATE
    assert AGENTS["apex"].model().__name__ == "ApexConfig"


def test_every_loader_resolves_a_bare_config_name_the_same_way():
    from reference_agents.agents import load_agent_config, load_config, resolve_config_path
    from reference_agents.agents.apex import load_apex_config
    from reference_agents.agents.dqn import DQNConfig
    from reference_agents.agents.impala import load_impala_config

    assert load_config("dqn_cartpole")[1] == resolve_config_path("dqn_cartpole")
    assert load_agent_config("dqn_cartpole", model=DQNConfig)[0].env.id == "CartPole-v1"
    assert load_apex_config("apex_cartpole")[1].endswith("apex_cartpole.yaml")
    assert load_impala_config("impala_cartpole")[1].endswith("impala_cartpole.yaml")
    with pytest.raises(ConfigError, match="no config of that name"):
        load_apex_config("no_such_config")
