"""Replicas of a run's update, as ``spacegraph train --replicas N [--replica-mode processes|towers]`` sets them:
the config's ``execution.strategy`` rewritten (`replica_strategy`, `with_replicas`), and what a run records of
the strategy it ran with (`strategy_record`)."""

from __future__ import annotations

from typing import Any, Callable

from harness.execution.strategies import MODES
from reference_agents.agents.base import with_strategy


def config_mode(strategy: Any) -> str | None:
    """The mode a config's ``execution.strategy`` runs in: a mapping's ``mode`` (``processes`` when it has none),
    ``towers`` for the older ``sync-replicas`` string (towers on ``execution.devices``), None for ``local``."""
    if isinstance(strategy, dict):
        return str(strategy.get("mode") or "processes")
    return "towers" if strategy == "sync-replicas" else None


def replica_strategy(execution: dict[str, Any], replicas: int, mode: str | None = None) -> dict[str, Any] | str:
    """The ``execution.strategy`` of a run given ``--replicas replicas [--replica-mode mode]``.

    ``replicas`` 1 is ``local``; else ``{type: sync-replicas, replicas, mode}`` with ``mode`` the one given, else
    the config's (`config_mode`), else ``processes``. The config's ``backend`` (gloo/nccl/auto) stays for
    processes; its devices stay when there is one per replica and the mode is unchanged.

    Args:
        execution: the config's ``execution`` section (a dict).
        replicas: the replicas asked for.
        mode: ``processes`` or ``towers`` (None: as above).

    Raises:
        ValueError: naming ``--replicas`` / ``--replica-mode`` for a value that is not allowed.
    """
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise ValueError(f"--replicas: expected a positive number of replicas; got {replicas!r}")
    if mode is not None and mode not in MODES:
        raise ValueError(f"--replica-mode: expected one of {', '.join(MODES)}; got {mode!r}")
    if replicas == 1:
        return "local"
    current = execution.get("strategy", "local")
    saved_mode = config_mode(current)
    chosen = mode or saved_mode or "processes"
    strategy: dict[str, Any] = {"type": "sync-replicas", "replicas": replicas, "mode": chosen}
    if isinstance(current, dict):
        if chosen == "processes" and current.get("backend") is not None:
            strategy["backend"] = current["backend"]
        devices = current.get("devices")
    else:
        devices = execution.get("devices") if current == "sync-replicas" else None
    if devices and len(devices) == replicas and chosen == saved_mode:
        strategy["devices"] = list(devices)
    return strategy


def with_replicas(config: dict[str, Any], replicas: int, mode: str | None = None) -> dict[str, Any]:
    """A copy of a config dict whose ``execution.strategy`` is `replica_strategy`'s (the rest of ``execution``,
    ``trace`` and ``replay``, kept; the older form's ``execution.devices`` dropped).

    Raises:
        ValueError: naming the flag, as `replica_strategy`.
    """
    return with_strategy(config, replica_strategy(dict(config.get("execution") or {}), replicas, mode))


def strategy_record(agent: Any) -> dict[str, Any] | None:
    """What a run records of the strategy its agent's update runs with: the executor strategy's ``describe()``
    (``{"type", "mode", "replicas", "backend", "devices"}``); None for an agent without an executor (a user's)."""
    strategy = getattr(getattr(agent, "executor", None), "strategy", None)
    describe = getattr(strategy, "describe", None)
    return describe() if callable(describe) else None


def describe_strategy(record: dict[str, Any] | None) -> str:
    """One line for a run's summary: ``local (one replica)``, ``2 replicas (processes, gloo) on cpu, cpu``, or
    ``-`` without a record (an agent without an executor)."""
    if not record:
        return "-"
    if int(record.get("replicas") or 1) <= 1:
        return "local (one replica)"
    extra = ", ".join(str(v) for v in (record.get("mode"), record.get("backend")) if v)
    devices = record.get("devices")
    return (f"{record['replicas']} replicas" + (f" ({extra})" if extra else "")
            + (f" on {', '.join(str(d) for d in devices)}" if devices else ""))


def replicas_loader(replicas: int, mode: str | None = None) -> Callable[[str, str | None], Any]:
    """``fn(checkpoint_dir, backend) -> agent``: the agent a checkpoint holds, rebuilt from its saved config with
    `with_replicas` applied and restored (`Trainer.resume`'s ``agent_loader`` for ``--resume DIR --replicas N``).

    Raises:
        ValueError: naming ``--replicas`` / ``--replica-mode`` for a bad value (checked here, before any load).
    """
    replica_strategy({}, replicas, mode)  # the flags checked before a checkpoint is read

    def load(ckpt: str, backend: str | None) -> Any:
        from reference_agents.agents.checkpoints import build_saved_agent
        from reference_agents.agents.registry import checkpoint_entry

        entry = checkpoint_entry(ckpt)
        return build_saved_agent(entry.agent_class, ckpt, backend, lambda config: with_replicas(config, replicas, mode))

    return load


def _towers(strategy: Any) -> int:
    """The towers a strategy (a record or a strategy mapping) runs (0: it runs none: local or processes)."""
    if isinstance(strategy, dict) and strategy.get("mode") == "towers" and int(strategy.get("replicas") or 1) > 1:
        return int(strategy["replicas"])
    return 0


def check_resume_replicas(saved: dict[str, Any] | None, directory: str, replicas: int, mode: str | None) -> None:
    """Refuses ``--resume DIR --replicas N [--replica-mode M]`` where the checkpoint cannot fit: a ``towers`` run's
    checkpoint holds every tower's variables, so it resumes with as many towers only, and a run without towers
    cannot resume as towers. ``saved``: the run's strategy record (`strategy_record`, in ``trainer.json``; None for
    runs saved before it, which are not checked here).

    Raises:
        ValueError: naming the flags, the run's strategy and what would fit.
    """
    if not saved:
        return
    execution = {"strategy": {"type": "sync-replicas", "replicas": saved["replicas"], "mode": saved.get("mode")}
                 } if int(saved.get("replicas") or 1) > 1 else {}
    new = replica_strategy(execution, replicas, mode)
    before, after = _towers(saved), _towers(new)
    if before == after:
        return
    flags = f"--replicas {replicas}" + (f" --replica-mode {mode}" if mode else "")
    if before:
        raise ValueError(f"{flags}: the run in {directory} ran {before} towers (mode towers), and its checkpoint holds "
                         f"each tower's variables: resume it with --replicas {before} --replica-mode towers, or "
                         f"without --replicas")
    raise ValueError(f"{flags}: the run in {directory} ran {describe_strategy(saved)}; its checkpoint has no tower "
                     f"variables, so it cannot resume as {after} towers: give --replica-mode processes (or leave "
                     f"--replicas out)")
