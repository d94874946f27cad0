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
      measured:                  # optional: per backend, how many runs over seeds not picked solved
        torch: {runs: 13, solved: 12}

One run per seed, in order, until ``min_solved`` runs have solved (passed) or too few seeds are left to
get there (failed): `SeedCriterion`, which the learning tests that have no spec file (Ape-X and IMPALA
on Ray and distributed TF, central inference) use as well. A criterion over several seeds tests learning
rather than one seed's random stream: a run's env steps to solve spread widely over seeds (DQN on
CartPole: 22,500-132,500 on PyTorch), so a single seed's budget holds by that seed's draws and a
legitimate change of the draws can move it. ``k`` of ``n`` is chosen from a measured success rate ``p``
so that a correct agent fails with probability `SeedCriterion.failure_probability` (binomial) below 1%;
the optional ``measured`` records that measurement per backend (``specs/agents/README.md``).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.specs.loader import SpecError, import_object, read_spec_mapping
from harness.spaces import Space, parse


R = TypeVar("R")


@dataclass(frozen=True)
class SeedVerdict(Generic[R]):
    """What a `SeedCriterion` run found: ``passed``, and ``runs``: ``(seed, result, solved)`` of the runs made."""

    passed: bool
    runs: list[tuple[int, R, bool]] = field(default_factory=list)

    @property
    def solved(self) -> int:
        """How many of the runs made solved."""
        return sum(ok for _, _, ok in self.runs)

    @property
    def seeds(self) -> list[int]:
        """The seeds run, in order."""
        return [seed for seed, _, _ in self.runs]


@dataclass(frozen=True)
class SeedCriterion:
    """``required`` of the ``seeds`` must solve; the seeds run in order and stop once the verdict is known.

    Args:
        seeds: the seeds, in the order they run (no repeats).
        required: how many of them must solve (``k`` of ``n``), 1 to ``len(seeds)``.

    Raises:
        ValueError: for repeated seeds or a ``required`` outside 1..len(seeds).
    """

    seeds: tuple[int, ...]
    required: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "seeds", tuple(int(s) for s in self.seeds))
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds: expected distinct seeds, at least one; got {list(self.seeds)}")
        if not 1 <= self.required <= len(self.seeds):
            raise ValueError(f"required: expected 1 to {len(self.seeds)} (the number of seeds); got {self.required}")

    def run(self, trial: Callable[[int], R], solved: Callable[[R], bool]) -> SeedVerdict[R]:
        """Calls ``trial(seed)`` for the seeds in order until ``required`` runs have solved (passed) or too few
        seeds are left for that (failed); ``solved(result)`` says whether a run solved."""
        runs: list[tuple[int, R, bool]] = []
        for i, seed in enumerate(self.seeds):
            done = sum(ok for _, _, ok in runs)
            if done >= self.required or done + len(self.seeds) - i < self.required:
                break
            result = trial(seed)
            runs.append((seed, result, bool(solved(result))))
        return SeedVerdict(sum(ok for _, _, ok in runs) >= self.required, runs)

    def explain(self, verdict: SeedVerdict[R], what: str, detail: Callable[[R], str]) -> str:
        """A failure message: ``what`` did not learn, how many of which seeds solved, and ``detail(result)``
        of each run."""
        return (f"{what}: {verdict.solved} of the runs with seeds {verdict.seeds} solved; {self.required} of the "
                f"seeds {list(self.seeds)} must. " + "; ".join(f"seed {s}: {detail(r)}" for s, r, _ in verdict.runs))

    def failure_probability(self, rate: float) -> float:
        """The probability that an agent whose runs solve independently with probability ``rate`` fails:
        fewer than ``required`` of ``len(seeds)`` solve (binomial)."""
        n = len(self.seeds)
        return sum(math.comb(n, j) * rate ** j * (1 - rate) ** (n - j) for j in range(self.required))

    def expected_runs(self, rate: float) -> float:
        """How many runs `run` makes on average when each solves with probability ``rate`` (at most
        ``len(seeds)``, at least ``required``)."""
        n, k = len(self.seeds), self.required
        states, expected = {0: 1.0}, 0.0  # solved so far -> probability, before run i
        for i in range(n):
            running = {s: p for s, p in states.items() if s < k and s + n - i >= k}
            expected += sum(running.values())
            states = {s: p for s, p in states.items() if s not in running}
            for s, p in running.items():
                states[s + 1] = states.get(s + 1, 0.0) + p * rate
                states[s] = states.get(s, 0.0) + p * (1 - rate)
        return expected


class Measured(BaseModel):
    """A measured success rate: ``solved`` of ``runs`` runs (seeds not picked) solved within the budget."""

    model_config = ConfigDict(extra="forbid")
    runs: int = Field(ge=1)
    solved: int = Field(ge=0)

    @property
    def rate(self) -> float:
        """``solved / runs``."""
        return self.solved / self.runs


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
    measured: dict[str, Measured] = Field(default_factory=dict)

    @property
    def required(self) -> int:
        """How many of the seeds must solve: ``min_solved``, or every seed when it is not given."""
        return len(self.seeds) if self.min_solved is None else self.min_solved

    @property
    def criterion(self) -> SeedCriterion:
        """The seeds and how many must solve, as a `SeedCriterion`."""
        return SeedCriterion(tuple(self.seeds), self.required)


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
    for backend, measured in (spec.learning.measured.items() if spec.learning else []):
        if backend not in spec.learning.backends:
            problems.append((f"learning.measured.{backend}", f"expected one of the backends "
                                                             f"{spec.learning.backends}; got {backend!r}"))
        if measured.solved > measured.runs:
            problems.append((f"learning.measured.{backend}.solved", f"must be at most runs ({measured.runs}); "
                                                                    f"got {measured.solved}"))
    for i, backend in enumerate(spec.learning.backends if spec.learning else []):
        if backend not in ("tf", "torch"):
            problems.append((f"learning.backends.{i}", f"expected 'tf' or 'torch'; got {backend!r}"))
    if problems:
        raise SpecError(path, problems)
    return LoadedAgentSpec(path, Path(path).stem, spec, cls, config_path)
