"""The agent registry: which agent a config's ``agent`` key names, its config class, how its checkpoints
are recognised, and the one loader and builder every caller (`spacegraph train`, `Trainer.resume`, the graph
view, tests) goes through.

Built in: ``dqn`` (`DQNAgent`), ``impala`` (`IMPALAAgent`) and ``apex`` (Ape-X: a distributed driver over the
DQN graph, built by `reference_agents.agents.apex.ApexDriver` with an actor executor, not by `build_agent`).
A user's agent needs no registration call: its config names the class by dotted path,
``agent: my_project.agents:MyAgent`` (or ``my_project.agents.MyAgent``), and the class carries what an entry
holds as class attributes (``config_class``, optionally ``checkpoint_format``); see `entry_from_class` and
the docs page "Your own agent". `register_agent` adds a short name for it.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from pydantic import BaseModel

from harness.execution.serialization import BadFileError
from harness.specs.loader import import_object as load_object
from reference_agents.agents.checkpoints import CHECKPOINT_STATE, read_agent_state
from reference_agents.agents.config import ConfigError, load_agent_config, read_config_file, resolve_config_path
from reference_agents.agents.dqn import DQNAgent, DQNConfig
from reference_agents.agents.impala import IMPALAAgent, IMPALAConfig


@dataclasses.dataclass(frozen=True)
class AgentEntry:
    """One kind of agent.

    Args:
        name: what a config's ``agent`` key says (a short name, or the dotted path of a user's class).
        config_class: the pydantic model its configs are checked against (a dotted ``module:Name`` path is
            imported on first use: Ape-X's lives above this layer).
        agent_class: what `build_agent` makes (``agent_class(config, backend=, seed=)``); None for an agent
            that is a distributed driver (Ape-X), built by its own command.
        checkpoint_format: the ``format`` its checkpoints' ``agent_state.npz`` carry (None: not recognised by
            format).
        run_marker: a file whose presence in a checkpoint folder marks a run of this agent (Ape-X's
            ``apex.json``; checked before the format).
        description: one line for listings.
    """

    name: str
    config_class: type[BaseModel] | str
    agent_class: type | None = None
    checkpoint_format: str | None = None
    run_marker: str | None = None
    description: str = ""

    def model(self) -> type[BaseModel]:
        """The config class (imported now when given by dotted path)."""
        if isinstance(self.config_class, str):
            return import_object(self.config_class, f"agent {self.name!r}: config_class")
        return self.config_class


#: The agents by the name a config's ``agent`` key gives (built-ins, `register_agent` calls, and user classes
#: named by dotted path once a config has named them).
AGENTS: dict[str, AgentEntry] = {}


def register_agent(name: str, config_class: type[BaseModel] | str, agent_class: type | None = None, *,
                   checkpoint_format: str | None = None, run_marker: str | None = None,
                   description: str = "") -> AgentEntry:
    """Registers an agent under ``name`` (see `AgentEntry` for the arguments); returns its entry.

    Raises:
        ValueError: when ``name`` is taken by another agent, or its checkpoint format by another entry.
    """
    entry = AgentEntry(name, config_class, agent_class, checkpoint_format, run_marker, description)
    old = AGENTS.get(name)
    if old is not None and old != entry:
        raise ValueError(f"register_agent: the name {name!r} is taken by {old.agent_class or old.config_class}")
    clash = [e.name for e in AGENTS.values() if checkpoint_format and e.checkpoint_format == checkpoint_format
             and e.name != name]
    if clash:
        raise ValueError(f"register_agent: checkpoint format {checkpoint_format!r} of {name!r} is already "
                         f"{clash[0]!r}'s")
    AGENTS[name] = entry
    return entry


def import_object(path: str, what: str) -> Any:
    """The object a dotted path names: ``package.module:Name`` or ``package.module.Name``.

    Raises:
        ValueError: naming ``what`` and the path when the module does not import or has no such name.
    """
    try:
        return load_object(path)
    except ImportError as exc:
        raise ValueError(f"{what}: {path!r}: {exc}") from None


def entry_from_class(path: str, cls: Any) -> AgentEntry:
    """The entry of a user's agent class named by dotted ``path``: its ``config_class`` (a pydantic model,
    required) and ``checkpoint_format`` (optional) class attributes.

    Raises:
        ValueError: naming ``path`` and the attribute that is missing or of the wrong kind.
    """
    if not isinstance(cls, type):
        raise ValueError(f"agent {path!r} is not a class (got {type(cls).__name__})")
    config_class = getattr(cls, "config_class", None)
    if not (isinstance(config_class, type) and issubclass(config_class, BaseModel)):
        raise ValueError(f"agent {path!r}: the class needs a config_class attribute, a pydantic model its configs "
                         f"are checked against (see reference_agents.agents.config.Section); got {config_class!r}")
    missing = [m for m in ("get_actions", "observe", "update_on_schedule") if not callable(getattr(cls, m, None))]
    if missing:
        raise ValueError(f"agent {path!r}: the class lacks {missing} of the Agent protocol "
                         f"(reference_agents.agents.base.Agent)")
    return AgentEntry(path, config_class, cls, getattr(cls, "checkpoint_format", None), None,
                      (cls.__doc__ or "").strip().split("\n")[0])


def agent_entry(name: str, source: str = "<config>") -> AgentEntry:
    """The entry for an ``agent`` key: a registered name, or a user's class by dotted path (registered under
    that path on first use).

    Raises:
        ConfigError: naming ``source`` and the ``agent`` key when it names nothing that imports.
    """
    if not isinstance(name, str):
        raise ConfigError(source, [("agent", f"must be a string (one of {sorted(AGENTS)} or package.module:Class); "
                                             f"got {name!r}")])
    if name in AGENTS:
        return AGENTS[name]
    if "." not in name and ":" not in name:
        raise ConfigError(source, [("agent", f"must be one of {sorted(AGENTS)} or the dotted path of an agent "
                                             f"class (package.module:Class); got {name!r}")])
    try:
        entry = entry_from_class(name, import_object(name, "agent"))
    except ValueError as exc:
        raise ConfigError(source, [("agent", str(exc))]) from None
    return register_agent(name, entry.config_class, entry.agent_class, checkpoint_format=entry.checkpoint_format,
                          description=entry.description)


def config_entry(config: Any) -> tuple[AgentEntry, Any, str]:
    """The entry of the agent a config names (its ``agent`` key, ``dqn`` when it has none), the config as read
    (a file's data is read here, once) and its source (the file path, ``<dict>`` or ``<config>``).

    Raises:
        ConfigError: naming the file when it cannot be read or holds no mapping, and the ``agent`` key when it
            names no known agent.
    """
    if isinstance(config, (str, os.PathLike)):
        source = resolve_config_path(os.fspath(config))
        data = read_config_file(source)
        if not isinstance(data, dict):
            raise ConfigError(source, [("", f"expected a mapping at the top; got {type(data).__name__}")])
    elif isinstance(config, dict):
        data, source = config, "<dict>"
    else:
        return agent_entry(str(getattr(config, "agent", "dqn")), "<config>"), config, "<config>"
    return agent_entry(data.get("agent", "dqn"), source), data, source


def agent_kind(config: Any) -> str:
    """The ``agent`` key of a config file, bare config name, dict or config object (``dqn`` when it has none).

    Raises:
        ConfigError: naming the file and the key when it names no known agent.
    """
    return config_entry(config)[0].name


def load_config(config: Any, overrides: dict[str, Any] | None = None) -> tuple[Any, str]:
    """THE config loader: the config checked against the class its ``agent`` key names, and its source.

    Args:
        config: a file, a bare name (``dqn_cartpole``: see `resolve_config_path`), a dict or a config object.
        overrides: top-level keys to replace before checking (``{"backend": "tf", "seed": 3}``; None skipped).

    Raises:
        ConfigError: naming the file, every key path at fault and what was expected.
    """
    entry, data, source = config_entry(config)
    return load_agent_config(data, overrides, model=entry.model(), source=source)


def build_agent(config: Any, backend: str | None = None, seed: int | None = None, **kwargs: Any) -> Any:
    """An agent from a config file, bare name, dict or config object; its ``agent`` key picks the class.

    Raises:
        ConfigError: for a bad config, or one whose agent is a distributed driver (Ape-X: `spacegraph train`
            builds it with an executor).
    """
    entry, _, source = config_entry(config)
    if entry.agent_class is None:
        raise ConfigError(source, [("agent", f"{entry.name!r} is a distributed driver, not one agent object: "
                                             f"run it with `spacegraph train` (or build its driver with an "
                                             f"executor: {entry.description})")])
    # the file itself (not the data read above), so that the agent's own errors name it
    return entry.agent_class(source if isinstance(config, (str, os.PathLike)) else config, backend=backend,
                             seed=seed, **kwargs)


def checkpoint_formats() -> dict[str, AgentEntry]:
    """The entries that recognise their checkpoints by format, by that format."""
    return {e.checkpoint_format: e for e in AGENTS.values() if e.checkpoint_format}


def checkpoint_entry(directory: str) -> AgentEntry:
    """The entry of the agent whose checkpoint ``directory`` holds: by the ``format`` of its
    ``agent_state.npz``, or, for a user's agent not imported yet, by the dotted path its saved config's
    ``agent`` key gives (imported now; its ``checkpoint_format`` must be that format).

    Raises:
        BadFileError: (a ValueError) naming the file when it is missing, damaged or of a format no agent has.
    """
    where = f"load_checkpoint: {directory} holds no readable agent checkpoint"
    try:
        meta, _ = read_agent_state(directory)
    except BadFileError as exc:
        raise exc.within(where) from None
    by_format = checkpoint_formats()
    fmt = meta.get("format")
    if fmt in by_format:
        return by_format[fmt]
    path = os.path.join(directory, CHECKPOINT_STATE)
    saved = meta.get("config")
    name = saved.get("agent") if isinstance(saved, dict) else None
    if isinstance(name, str) and name not in AGENTS and ("." in name or ":" in name):
        try:
            entry = agent_entry(name, path)
        except ConfigError as exc:
            raise BadFileError(path, f"names agent {name!r}, which does not import: {exc}", where) from None
        if entry.checkpoint_format == fmt:
            return entry
    raise BadFileError(path, f"is not an agent checkpoint's state file: its format is {fmt!r}, expected "
                             f"{' or '.join(repr(f) for f in by_format)} (or the format of a user's agent that its "
                             f"saved config's agent key names)", where)


def checkpoint_format(directory: str) -> str:
    """The ``format`` an agent checkpoint directory's ``agent_state.npz`` names (a registered one).

    Raises:
        BadFileError: (a ValueError) naming the file when it is missing, damaged or of another format.
    """
    return checkpoint_entry(directory).checkpoint_format


def checkpoint_kind(directory: str) -> str:
    """The registered agent whose checkpoint ``directory`` is (by its run marker, else its format).

    Raises:
        BadFileError: (a ValueError) naming the file when the folder holds no agent checkpoint.
    """
    for entry in AGENTS.values():
        if entry.run_marker and os.path.exists(os.path.join(directory, entry.run_marker)):
            return entry.name
    return checkpoint_entry(directory).name


def load_checkpoint(directory: str, backend: str | None = None) -> Any:
    """The agent a checkpoint directory holds (any registered agent class, or a user's by its saved config),
    restored.

    Raises:
        BadFileError: (a ValueError) naming the checkpoint file that is missing, damaged or does not fit.
    """
    return checkpoint_entry(directory).agent_class.load_checkpoint(directory, backend=backend)


register_agent("dqn", DQNConfig, DQNAgent, checkpoint_format=DQNAgent.checkpoint_format,
               description="DQN: double Q, dueling, n-step, prioritized and frame replay (one process)")
register_agent("impala", IMPALAConfig, IMPALAAgent, checkpoint_format=IMPALAAgent.checkpoint_format,
               description="IMPALA: V-trace actor-critic; one process, distributed TF, Ray or central inference")
register_agent("apex", "reference_agents.agents.apex.config:ApexConfig", None, run_marker="apex.json",
               description="Ape-X: reference_agents.agents.apex.ApexDriver(config, executor), "
                           "spacegraph train --executor local|ray")
