"""Agent spec files (``specs/agents/*.yaml``): which agent, which config, what its API must look like, what it must learn.

An agent spec names the agent class and a config, the root API methods of the
built graph with their output spaces (checked on every backend), and an
optional learning criterion that `suites/agents` turns into a learning test::

    agent: reference_agents.agents.DQNAgent
    config: reference_agents/configs/dqn_cartpole.yaml     # relative to the repository root
    overrides: {memory: {capacity: 1000}}                 # merged into the config for the API checks
    api:
      act: "int64[B](0,1)"
      update_from_memory: ["float32[]", "float32[]", "float32[B]"]
    learning:                                             # optional
      env_steps: 50000           # the budget of training env steps
      min_return: 475            # greedy evaluation mean that counts as solved
      eval_episodes: 100
      eval_every: 2500
      seeds: [0, 1, 2]
      min_solved: 2              # optional: how many of the seeds must solve (default: all of them)
      backends: [tf, torch]

One run per seed, in order, until ``min_solved`` runs have solved (passed) or too few seeds are left to
get there (failed). A criterion over several seeds tests learning rather than one seed's random stream:
a run's env steps to solve spread widely over seeds (DQN on CartPole: 22,500-132,500 on PyTorch), so a
single seed's budget holds by that seed's draws and a legitimate change of the draws can move it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.specs.loader import SpecError, import_object, read_spec_mapping
from harness.spaces import Space, parse


class LearningSpec(BaseModel):
    """What an agent must learn and within which budget."""

    model_config = ConfigDict(extra="forbid")
    env_steps: int = Field(ge=1)
    min_return: float
    eval_episodes: int = Field(100, ge=1)
    eval_every: int = Field(5000, ge=1)
    seeds: list[int] = Field(min_length=1)
    min_solved: int | None = Field(None, ge=1)
    backends: list[str] = Field(default_factory=lambda: ["tf", "torch"], min_length=1)

    @property
    def required(self) -> int:
        """How many of the seeds must solve: ``min_solved``, or every seed when it is not given."""
        return len(self.seeds) if self.min_solved is None else self.min_solved


class AgentSpec(BaseModel):
    """One agent spec file."""

    model_config = ConfigDict(extra="forbid")
    agent: str
    description: str = ""
    config: str
    overrides: dict[str, Any] = Field(default_factory=dict)
    api: dict[str, str | list[Any]] = Field(min_length=1)  # a space, or a list (nested for nested tuples)
    learning: LearningSpec | None = None


@dataclass(frozen=True)
class LoadedAgentSpec:
    """A validated agent spec with its class imported and its config path resolved."""

    path: str
    name: str
    spec: AgentSpec
    agent_class: type
    config_path: str

    def output_space(self, method: str) -> Space | tuple[Any, ...]:
        """The declared output space(s) of ``method`` (a list declares a tuple of outputs, nested lists nested
        tuples, e.g. an LSTM's ``(h, c)``)."""
        def nested(text: Any) -> Any:
            return tuple(nested(t) for t in text) if isinstance(text, list) else parse(text)

        return nested(self.spec.api[method])

    def config(self, overrides: bool = True) -> dict[str, Any]:
        """The agent config as a dict, with the spec's ``overrides`` merged in (one level deep)."""
        data = read_spec_mapping(self.config_path)  # a SpecError naming the config file when it does not read
        if overrides:
            for key, value in self.spec.overrides.items():
                if isinstance(value, dict) and isinstance(data.get(key), dict):
                    data[key] = {**data[key], **value}
                else:
                    data[key] = value
        return data


def load_agent_spec(path: str | os.PathLike, root: str | os.PathLike | None = None) -> LoadedAgentSpec:
    """Reads and checks one agent spec.

    Args:
        path: the spec file.
        root: the folder the ``config`` path is relative to (default: the spec folder's grandparent,
            i.e. the repository root for ``specs/agents/x.yaml``).

    Raises:
        SpecError: naming the file and every key path at fault.
    """
    path = str(path)
    data = read_spec_mapping(path)
    try:
        spec = AgentSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(path, [(".".join(str(p) for p in e["loc"]),
                                "unknown key" if e["type"] == "extra_forbidden" else
                                "required key is missing" if e["type"] == "missing" else e["msg"])
                               for e in exc.errors()]) from None
    problems: list[tuple[str, str]] = []
    cls: Any = None
    try:
        cls = import_object(spec.agent)
    except ImportError as exc:
        problems.append(("agent", f"class does not import: {exc}"))
    base = Path(root) if root is not None else Path(path).resolve().parent.parent.parent
    config_path = str(base / spec.config)
    if not os.path.isfile(config_path):
        problems.append(("config", f"no such file {config_path}"))
    for method, text in spec.api.items():
        for i, t in enumerate(text if isinstance(text, list) else [text]):
            try:
                parse(t)
            except ValueError as exc:
                problems.append((f"api.{method}" + (f".{i}" if isinstance(text, list) else ""), str(exc)))
    if spec.learning is not None and spec.learning.min_solved is not None \
            and spec.learning.min_solved > len(spec.learning.seeds):
        problems.append(("learning.min_solved", f"must be at most the number of seeds "
                                                f"({len(spec.learning.seeds)}); got {spec.learning.min_solved}"))
    if spec.learning is not None and len(set(spec.learning.seeds)) != len(spec.learning.seeds):
        problems.append(("learning.seeds", f"must not repeat a seed; got {spec.learning.seeds}"))
    for i, backend in enumerate(spec.learning.backends if spec.learning else []):
        if backend not in ("tf", "torch"):
            problems.append((f"learning.backends.{i}", f"expected 'tf' or 'torch'; got {backend!r}"))
    if problems:
        raise SpecError(path, problems)
    return LoadedAgentSpec(path, Path(path).stem, spec, cls, config_path)
