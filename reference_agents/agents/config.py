"""Agent configs, the parts every agent shares: the loader (a declarative YAML/JSON file or dict checked
into a pydantic model with located errors), `ConfigError`, the bare-name resolver and the sections every
agent has (``env``, ``evaluation``, ``execution``). Each agent's own config class lives in its folder
(`reference_agents.agents.dqn.config.DQNConfig`, ...); `reference_agents.agents.load_config` picks it by the
config's ``agent`` key.

"Solved" is the mean return of ``evaluation.episodes`` greedy episodes reaching ``evaluation.target_return``,
played when a ``screen_episodes`` screen reaches it (see `EvaluationConfig`). Errors name the file and the key
path (``dqn.yaml: update.batch_size: ...``).
"""

from __future__ import annotations

import json
import os
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError, model_validator


class ConfigError(ValueError):
    """An agent config is invalid: names the file (or ``<dict>``), the key path and what was expected."""

    def __init__(self, source: str, problems: list[tuple[str, str]]) -> None:
        self.source = source
        self.problems = problems
        lines = [f"{source}: {len(problems)} problem(s) in the agent config"]
        lines += [f"  {path or '<top>'}: {msg}" for path, msg in problems]
        super().__init__("\n".join(lines))


class Section(BaseModel):
    """A config section: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")


class EnvConfig(Section):
    """The environment the agent acts in (the worker and `spacegraph train` make it)."""

    id: str = Field(description="a gymnasium id, e.g. CartPole-v1 or ALE/Pong-v5")
    num_envs: int = Field(1, ge=1, description="environments stepped in lockstep by one worker")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="passed to gymnasium.make")
    atari: bool = Field(False, description="Atari frame processing env-side: gray 84x84, 4 stacked, uint8")
    vectorizer: Literal["python", "ale", "envpool"] = Field(
        "python", description="what steps the num_envs environments: python (VectorEnv over make_env), ale "
        "(ale-py's native AtariVectorEnv) or envpool (EnvPool); the native ones need atari: true and an ALE id "
        "(reference_agents.workers.native_envs)")

    @model_validator(mode="after")
    def _native_needs_atari(self) -> "EnvConfig":
        if self.vectorizer != "python" and not self.atari:
            raise ValueError(f"vectorizer {self.vectorizer!r} steps Atari with its own frame processing: it needs "
                             f"atari: true and an ALE id such as ALE/Pong-v5 (or vectorizer: python)")
        return self


class EvaluationConfig(Section):
    """Greedy evaluation during training, and what counts as solved
    (`reference_agents.training.EvaluationProtocol` applies it).

    Every ``every`` env steps the greedy policy plays ``screen_episodes`` episodes; when their mean
    reaches ``target_return`` it plays the full ``episodes``, and the run is solved when *their* mean
    reaches ``target_return``. Without a target each evaluation is the screen alone; with
    ``screen_episodes`` null (or not below ``episodes``) each evaluation plays ``episodes``.
    """

    every: int = Field(5000, ge=1, description="env steps between evaluations")
    episodes: int = Field(100, ge=1, description="episodes of the full evaluation, whose mean decides solved")
    screen_episodes: int | None = Field(10, ge=1, description="episodes of the screen played first")
    target_return: float | None = Field(None, allow_inf_nan=False, description="the full mean that counts as solved")
    envs: int | None = Field(None, ge=1, description="environments per evaluation (default: screen one per "
                                                    "episode, full min(episodes, 20))")

    @model_validator(mode="before")
    @classmethod
    def _renamed_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for old, new in _RENAMED_EVALUATION_KEYS.items():
                if old in data:
                    raise ValueError(f"key {old!r} is called {new!r} here (evaluation.{new}); the keys are "
                                     f"every, episodes, screen_episodes, target_return, envs")
        return data


#: Keys an ``evaluation`` section may be written with elsewhere (agent specs, the learning report, CLI
#: flags), and their names here.
_RENAMED_EVALUATION_KEYS = {"min_return": "target_return", "target": "target_return", "eval_episodes": "episodes",
                            "eval_every": "every", "screen": "screen_episodes", "eval_envs": "envs"}


class StrategyConfig(Section):
    """The mapping form of ``execution.strategy`` (`harness.execution.strategies.make_strategy` builds it):
    ``replicas`` synchronous replicas of the update, one per process (``mode: processes``, gradients
    all-reduced over ``backend``) or as towers in this process (``mode: towers``); ``replicas: 1`` is local."""

    type: Literal["local", "sync-replicas"] = "sync-replicas"
    replicas: int = Field(1, ge=1, description="replicas of the update (replica 0 included); 1: local")
    mode: Literal["processes", "towers"] = Field("processes", description="processes: one replica per process, "
                                                 "gradients all-reduced; towers: in this process")
    backend: Literal["auto", "gloo", "nccl"] = Field("auto", description="processes mode's all-reduce: auto (nccl "
                                                     "when every device is CUDA, else gloo), gloo or nccl")
    devices: list[str] | None = Field(None, description="one device per replica (default: cpu for each)")

    @model_validator(mode="after")
    def _consistent(self) -> "StrategyConfig":
        if self.devices is not None and len(self.devices) != self.replicas:
            raise ValueError(f"devices lists {len(self.devices)} device(s) for {self.replicas} replica(s); give one "
                             f"per replica")
        if self.mode == "towers" and self.backend != "auto":
            raise ValueError(f"backend {self.backend!r} is for mode processes (towers have no all-reduce backend)")
        if self.type == "local" and self.replicas != 1:
            raise ValueError(f"type local runs one replica; got replicas {self.replicas}")
        return self


#: The tags of the two forms of ``execution.strategy`` (pydantic puts them into error locations; the loader
#: leaves them out of the key paths it reports).
_NAME_TAG, _MAPPING_TAG = "<strategy name>", "<strategy mapping>"


def _strategy_form(value: Any) -> str:
    """Which form ``execution.strategy`` is written in: a mapping, or a name."""
    return _MAPPING_TAG if isinstance(value, (dict, StrategyConfig)) else _NAME_TAG


class ExecutionConfig(Section):
    """Where the update runs: ``local`` (one device, the default) or synchronous replicas of the update,
    either as the mapping ``strategy: {type: sync-replicas, replicas: N, mode: processes | towers, backend:
    auto | gloo | nccl, devices: [...]}`` (`StrategyConfig`; processes: one replica per process,
    `harness.execution.strategies.ProcessReplicas`) or as ``strategy: sync-replicas`` with ``devices`` (towers
    on those devices, one entry per replica; a name may repeat; `harness.execution.strategies.SyncReplicas`);
    which API methods run as a recorded graph per input shapes (``trace``, `GraphExecutor`'s; on PyTorch a
    TorchScript trace, on TF a no-op); and whether the other methods without gradients run as replays of their
    recorded PyTorch calls (``replay``, `GraphExecutor`'s; on TF a no-op)."""

    strategy: Annotated[Union[Annotated[Literal["local", "sync-replicas"], Tag(_NAME_TAG)],
                              Annotated[StrategyConfig, Tag(_MAPPING_TAG)]],
                        Discriminator(_strategy_form)] = "local"
    devices: list[str] = Field(default_factory=list, description="one device per replica, e.g. ['/cpu:0', '/cpu:1'] "
                               "(the strategy: sync-replicas form; the mapping form has its own devices)")
    trace: list[str] = Field(default_factory=list, description="API methods run as a recorded graph per input shapes "
                             "(GraphExecutor's trace; PyTorch: TorchScript), e.g. ['act']")
    replay: bool = Field(True, description="PyTorch: run the methods that record no gradients (and are not traced) "
                         "as replays of the ops their first two calls per input shapes record (GraphExecutor's "
                         "replay); false: step by step, eagerly")

    @model_validator(mode="after")
    def _devices_given(self) -> "ExecutionConfig":
        if self.strategy == "sync-replicas" and not self.devices:
            raise ValueError("strategy sync-replicas needs devices: a non-empty list of device names (or use the "
                             "mapping strategy: {type: sync-replicas, replicas: N})")
        if isinstance(self.strategy, StrategyConfig) and self.devices:
            raise ValueError("devices belongs inside the mapping strategy (strategy.devices) when strategy is a "
                             "mapping")
        return self

    @property
    def replicas(self) -> int:
        """How many replicas of the update the strategy runs (1: local)."""
        if isinstance(self.strategy, StrategyConfig):
            return self.strategy.replicas
        return len(self.devices) if self.strategy == "sync-replicas" else 1


#: libyaml's safe loader where PyYAML was built with it (the same documents, about 8x faster: a config is read
#: two or three times on every `spacegraph train` start), else PyYAML's own.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_config_file(path: str) -> Any:
    """The data in a YAML or JSON config file; `ConfigError` naming the file when it cannot be read or parsed."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except UnicodeDecodeError as exc:
        raise ConfigError(path, [("", f"not a text file (UTF-8): {exc}")]) from None
    except OSError as exc:
        raise ConfigError(path, [("", f"cannot read the file: {exc}")]) from None
    try:
        return json.loads(text) if path.endswith(".json") else yaml.load(text, Loader=_YAML_LOADER)
    except (ValueError, RecursionError, yaml.YAMLError) as exc:
        raise ConfigError(path, [("", f"not valid {'JSON' if path.endswith('.json') else 'YAML'}: "
                                      f"{type(exc).__name__ if isinstance(exc, RecursionError) else exc}")]) from None


#: The configs that come with the package (``dqn_cartpole``, ``impala_pong``, ...).
CONFIG_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")
#: Where a bare config name is looked for, in order (relative to the current folder), before `CONFIG_DIR`.
CONFIG_SEARCH = (".", "configs", os.path.join("reference_agents", "configs"))
CONFIG_SUFFIXES = (".yaml", ".yml", ".json")


def resolve_config_path(text: str) -> str:
    """THE name resolver: a config file path for ``text``, an existing file or a bare name (``dqn_cartpole``).

    A bare name is ``NAME.yaml``/``.yml``/``.json`` in the current folder, in ``configs/`` (a project's), in
    ``reference_agents/configs/`` (a checkout of this repository), and last in the installed package's
    `CONFIG_DIR`: a checkout's file wins over the installed copy. `describe_config_path` says which was taken.

    Raises:
        ConfigError: naming ``text`` and, for a bare name, the folders searched and the configs there.
    """
    if os.path.isfile(text):
        return text
    bare = os.sep not in text and "/" not in text and not text.endswith(CONFIG_SUFFIXES)
    if not bare:
        raise ConfigError(text, [("", "no such file")])
    folders = [*CONFIG_SEARCH, CONFIG_DIR]
    for folder in folders:
        for ext in CONFIG_SUFFIXES:
            candidate = os.path.join(folder, text + ext)
            if os.path.isfile(candidate):
                return candidate
    known = sorted(os.path.splitext(f)[0] for f in os.listdir(CONFIG_DIR) if f.endswith(CONFIG_SUFFIXES))
    raise ConfigError(text, [("", f"no such file, and no config of that name in {', '.join(folders)} "
                                  f"(there are: {', '.join(known) or 'none'})")])


def describe_config_path(text: str, path: str) -> str:
    """Which file the config argument ``text`` resolved to (the installed copy is named as such)."""
    where = os.path.abspath(path)
    config_dir = os.path.abspath(CONFIG_DIR)
    if os.path.abspath(os.path.dirname(path)) == config_dir and \
            not config_dir.startswith(os.path.abspath(os.curdir) + os.sep):
        return f"{where} (the installed reference_agents package's copy of {text!r})"
    return where


def load_agent_config(config: str | os.PathLike | dict[str, Any] | BaseModel,
                      overrides: dict[str, Any] | None = None, *, model: type[BaseModel],
                      source: str | None = None) -> tuple[Any, str]:
    """A config checked against ``model`` and where it came from (the file path, or ``<dict>``).

    Most callers want `reference_agents.agents.load_config`, which picks ``model`` by the ``agent`` key.

    Args:
        config: a YAML or JSON file path, a dict of the same structure, or a config object.
        overrides: top-level keys to replace before checking (``{"backend": "tf", "seed": 3}``).
        model: the config class to check against (`DQNConfig`, `IMPALAConfig`, a user agent's ``config_class``).
        source: what errors name for a dict (default ``<dict>``): the file it was read from.

    Raises:
        ConfigError: naming the file, every key path at fault and what was expected.
    """
    if isinstance(config, BaseModel):
        data, source = config.model_dump(by_alias=True), "<config>"
    elif isinstance(config, dict):
        data, source = dict(config), source or "<dict>"
    elif isinstance(config, (str, os.PathLike)):
        source = resolve_config_path(os.fspath(config))  # a file, or a bare name like dqn_cartpole
        data = read_config_file(source)
    else:
        raise ConfigError("<config>", [("", f"expected a file path, a dict or a {model.__name__}; got "
                                            f"{type(config).__name__}")])
    if not isinstance(data, dict):
        raise ConfigError(source, [("", f"expected a mapping at the top; got {type(data).__name__}")])
    for key, value in (overrides or {}).items():
        if value is not None:
            data[key] = value
    try:
        return model.model_validate(data), source
    except ValidationError as exc:
        problems = [(".".join(str(p) for p in err["loc"] if p not in (_NAME_TAG, _MAPPING_TAG)),
                     err["msg"].removeprefix("Value error, ")
                     + (f" (got {err['input']!r})" if err["type"] not in ("missing", "extra_forbidden")
                        and not isinstance(err.get("input"), (dict, list)) else ""))
                    for err in exc.errors()]
        raise ConfigError(source, problems) from None


def discrete_env_spaces(agent: str, cfg: Any, source: str, state_space: Any = None,
                        action_space: Any = None) -> tuple[Any, Any, int]:
    """``(state_space, action_space, num_actions)`` of a discrete-action agent.

    A space not given comes from the config's environment (``cfg.env``); text forms are parsed.
    The state space loses its batch rank; the action space must be ``IntBox(n)`` (``int64[](0,n-1)``).

    Raises:
        ConfigError: naming ``source`` and the ``env`` key when the action space is not discrete.
        TypeError: naming ``agent`` when a given space is neither a Space nor its text form.
    """
    from harness.spaces import IntBox, Space, parse

    if state_space is None or action_space is None:
        from reference_agents.environments import env_spaces

        env_state, env_action = env_spaces(cfg.env.id, atari=cfg.env.atari, **cfg.env.kwargs)
        state_space = state_space if state_space is not None else env_state
        action_space = action_space if action_space is not None else env_action
    spaces = []
    for space, what in ((state_space, "state_space"), (action_space, "action_space")):
        if isinstance(space, str):
            space = parse(space)
        if not isinstance(space, Space):
            raise TypeError(f"{agent}Agent: {what} must be a Space or its text form; got {space!r}")
        spaces.append(space)
    state, action = spaces[0].with_batch_rank(False), spaces[1]
    if not (isinstance(action, IntBox) and action.shape == () and action.bounded and int(action.low) == 0):
        raise ConfigError(source, [("env", f"{agent} needs a discrete action space IntBox(n) "
                                           f"(int64[](0,n-1)); the env has {action!r}")])
    return state, action, int(action.high) + 1
