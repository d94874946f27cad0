"""`spacegraph checkpoint inspect PATH`: what a checkpoint holds (agent, config, backend, counters, format and
format version, the spacegraph version that wrote it, its files and their arrays), read from the files' metadata
and array headers only: no agent is built, and neither TensorFlow nor PyTorch is imported.

PATH is a run directory (its newest readable checkpoint is shown: ``checkpoint/``, else ``checkpoint.old/``), a
checkpoint directory, or one saved file (a model export, a shard snapshot, ``trainer.json``...).
Exit status: 0 shown, 2 bad input (no such path, not a checkpoint, a damaged file: one error line names it).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import zipfile
from typing import Any

#: The metadata members of the ``.npz`` files spacegraph writes (agent files and shard snapshots; model exports).
META_MEMBERS = ("__meta__", "__spacegraph_meta__")
#: Files whose presence marks a checkpoint directory.
MARKERS = ("agent_state.npz", "apex.json", "trainer.json")
#: Counters shown from each file's metadata, in this order.
COUNTERS = {"agent_state.npz": ("timesteps", "updates", "rollouts_made", "rollouts_learned", "outbox"),
            "worker.json": ("total_steps", "total_frames", "total_updates"),
            "trainer.json": ("total_steps_target", "agent_timesteps", "solved_at_step")}
NOT_A_CHECKPOINT = ("a run directory (with checkpoint/ or checkpoint.old/), a checkpoint directory (with "
                    f"{', '.join(MARKERS)}) or a file spacegraph saved (.npz or .json)")


class InspectError(ValueError):
    """A path that cannot be inspected: the message names it and what was expected."""


def _declare_formats() -> None:
    """Imports the modules that declare every built-in format (none of them imports TensorFlow or PyTorch)."""
    import reference_agents.agents  # noqa: F401  (DQN and IMPALA checkpoints and models)
    import reference_agents.agents.apex.shard  # noqa: F401  (shard snapshots)
    import reference_agents.training.apex  # noqa: F401  (apex.json; trainer.json by training.checkpoints)


def read_meta(path: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """A saved file's metadata (None: it has none) and its arrays (``.npz``: name, shape, dtype, bytes each), the
    arrays from their headers only.

    Raises:
        BadFileError: naming the file when it is missing, damaged or not JSON / ``.npz``.
    """
    from harness.execution.serialization import READ_ERRORS, BadFileError, describe_read_error, npz_members
    from harness.execution.serialization import read_json

    if path.endswith(".json"):
        return read_json(path, "a JSON state file", versions=False), []
    members = npz_members(path)
    arrays = [{"name": n, "shape": list(shape), "dtype": dtype.str if dtype.kind == "U" else dtype.name,
               "bytes": size} for n, shape, dtype, size in members if n not in META_MEMBERS]
    meta = None
    for key in META_MEMBERS:
        if any(n == key for n, _, _, _ in members):
            try:
                import numpy as np

                with zipfile.ZipFile(path) as archive, archive.open(key + ".npy") as fh:
                    meta = json.loads(str(np.lib.format.read_array(fh, allow_pickle=False)))
            except READ_ERRORS as exc:
                raise BadFileError(path, describe_read_error(exc)) from None
            if not isinstance(meta, dict):
                raise BadFileError(path, f"has metadata {key!r} that is not a JSON object")
    return meta, arrays


def legacy_format(name: str) -> str | None:
    """The format a checkpoint file named ``name`` (relative to its checkpoint) has when it records none (written
    before it did: format 1 of that format)."""
    from reference_agents.agents.apex.shard import SNAPSHOT_FORMAT
    from reference_agents.training.apex import APEX_STATE, APEX_STATE_FORMAT, SHARDS_DIR

    if name == APEX_STATE:
        return APEX_STATE_FORMAT
    if os.path.dirname(name) == SHARDS_DIR and name.endswith(".npz"):
        return SNAPSHOT_FORMAT
    return None


def describe_file(path: str, root: str) -> dict[str, Any]:
    """One file of a checkpoint: its name (relative to ``root``), size, format and version, arrays; ``problem``
    when it cannot be read."""
    from harness.execution.formats import VERSION_KEY, WRITER_KEY, version_status
    from harness.execution.serialization import BadFileError

    entry: dict[str, Any] = {"name": os.path.relpath(path, root), "bytes": os.path.getsize(path)}
    if not path.endswith((".npz", ".json")):
        return entry
    try:
        meta, entry["arrays"] = read_meta(path)
    except BadFileError as exc:
        entry["problem"] = str(exc)
        return entry
    if path.endswith(".json") and not entry["arrays"]:
        del entry["arrays"]
    legacy = legacy_format(entry["name"])
    if legacy and (meta is None or "format" not in meta):  # written before it recorded its format: format 1
        meta = {"format": legacy, **(meta or {})}
    if meta is not None and "format" in meta:
        status, words = version_status(meta)
        entry.update({"format": meta["format"], "format_version": meta.get(VERSION_KEY, 1),
                      "spacegraph": meta.get(WRITER_KEY), "status": status, "status_words": words})
    entry["meta"] = meta
    return entry


def find_checkpoint(path: str) -> tuple[str, str | None, str | None]:
    """``(what to show, the run directory or None, a note)`` for PATH.

    Raises:
        InspectError: naming PATH when it does not exist or is no checkpoint.
    """
    from reference_agents.training.checkpoints import checkpoint_dirs

    if not os.path.exists(path):
        raise InspectError(f"{path} does not exist; expected {NOT_A_CHECKPOINT}")
    if os.path.isfile(path):
        if not path.endswith((".npz", ".json")):
            raise InspectError(f"{path} is not a checkpoint: expected {NOT_A_CHECKPOINT}")
        return path, None, None
    if any(os.path.exists(os.path.join(path, m)) for m in MARKERS):
        return path, None, None
    folders = checkpoint_dirs(path)
    if not folders:
        held = sorted(os.listdir(path))
        raise InspectError(f"{path} is not a checkpoint: expected {NOT_A_CHECKPOINT}; it holds "
                           f"{held[:6] if held else 'nothing'}{' and more' if len(held) > 6 else ''}")
    for ckpt in folders:
        if all("problem" not in describe_file(os.path.join(ckpt, m), ckpt) for m in MARKERS
               if os.path.exists(os.path.join(ckpt, m))):
            note = None if ckpt == folders[0] else f"{folders[0]} is damaged or incomplete: showing the older one"
            return ckpt, path, note
    return folders[0], path, None


def inspect_path(path: str) -> dict[str, Any]:
    """Everything `spacegraph checkpoint inspect` shows about PATH, as JSON-safe data.

    Raises:
        InspectError: naming PATH when it does not exist or is no checkpoint.
    """
    _declare_formats()
    target, run_dir, note = find_checkpoint(os.fspath(path))
    if os.path.isfile(target):
        files = [describe_file(target, os.path.dirname(target) or ".")]
        if "problem" not in files[0] and "format" not in files[0]:
            raise InspectError(f"{path} is not a file spacegraph saved: it records no format; expected "
                               f"{NOT_A_CHECKPOINT}")
    else:
        files = [describe_file(os.path.join(r, f), target) for r, _, names in sorted(os.walk(target))
                 for f in sorted(names)]
    by_name = {f["name"]: f for f in files}
    main = by_name.get("agent_state.npz") or by_name.get("apex.json") or by_name.get("trainer.json") or files[0]
    meta = main.get("meta") or {}
    apex = (by_name.get("apex.json") or {}).get("meta") or {}
    config = apex.get("config") or meta.get("config")
    agent = "apex" if apex else (config or {}).get("agent") if isinstance(config, dict) else meta.get("root_class")
    counters: dict[str, Any] = {}
    for name, keys in COUNTERS.items():
        saved = (by_name.get(name) or {}).get("meta") or {}
        counters.update({k: saved[k] for k in keys if isinstance(saved.get(k), int) and k not in counters})
        if name == "worker.json" and isinstance(saved.get("episodes"), list):
            counters["episodes"] = len(saved["episodes"])
        if name == "trainer.json" and isinstance(saved.get("history"), list):
            counters["evaluations"] = len(saved["history"])
    if isinstance(apex.get("ledger"), dict):
        counters.update({f"replay_{k}": apex["ledger"][k] for k in ("produced", "held", "lost")
                         if isinstance(apex["ledger"].get(k), int)})
    saved_at = meta.get("saved_at")
    return {"path": os.fspath(path), "checkpoint": target, "run_dir": run_dir, "note": note, "agent": agent,
            "format": main.get("format"), "format_version": main.get("format_version"),
            "spacegraph": main.get("spacegraph"), "status": main.get("status"),
            "status_words": main.get("status_words"),
            "backend": meta.get("backend") or ((by_name.get("trainer.json") or {}).get("meta") or {}).get("backend"),
            "saved_at": datetime.datetime.fromtimestamp(saved_at, datetime.timezone.utc).isoformat(timespec="seconds")
            if isinstance(saved_at, (int, float)) else None,
            "state_space": meta.get("state_space"), "action_space": meta.get("action_space"),
            "num_actions": meta.get("num_actions"), "counters": counters, "config": config,
            "files": [{k: v for k, v in f.items() if k != "meta"} for f in files],
            "problems": [f["problem"] for f in files if "problem" in f]}


def _size(n: int) -> str:
    return f"{n:,} B" if n < 10_000 else f"{n / 1024:,.1f} KiB" if n < 10_000_000 else f"{n / 2 ** 20:,.1f} MiB"


def render(info: dict[str, Any], full_config: bool = False) -> str:
    """The text `spacegraph checkpoint inspect` prints for `inspect_path`'s ``info``."""
    lines = [f"checkpoint   {info['checkpoint']}" + (f"  (the newest of the run {info['run_dir']})"
                                                       if info["run_dir"] else "")]
    if info["note"]:
        lines.append(f"note         {info['note']}")
    lines.append(f"agent        {info['agent'] or 'unknown'}" + (f" on {info['backend']}" if info["backend"] else ""))
    if info["format"]:
        lines.append(f"format       {info['format']}, version {info['format_version']}: {info['status_words']}")
    writer = info["spacegraph"] or "a spacegraph that recorded no versions (format 1)"
    lines.append(f"written by   {'spacegraph ' + writer if info['spacegraph'] else writer}"
                 + (f", saved {info['saved_at']}" if info["saved_at"] else ""))
    if info["state_space"] or info["action_space"] or info["num_actions"]:
        lines.append(f"spaces       states {info['state_space']}, "
                     + (f"actions {info['action_space']}" if info["action_space"] else
                        f"{info['num_actions']} actions"))
    if info["counters"]:
        lines.append("counters     " + ", ".join(f"{k} {v:,}" for k, v in info["counters"].items()))
    if isinstance(info["config"], dict):
        if full_config:
            lines.append("config       " + json.dumps(info["config"], indent=2).replace("\n", "\n             "))
        else:
            lines.append("config       (a summary; --config prints it whole)")
            width = max((len(k) for k in info["config"]), default=0) + 2
            for key, value in info["config"].items():
                text = json.dumps(value, separators=(", ", ": "))
                lines.append(f"  {key + ':':<{width}}{text if len(text) <= 96 else text[:93] + '...'}")
    total = sum(f["bytes"] for f in info["files"])
    lines.append(f"files        {len(info['files'])}, {_size(total)}")
    for f in info["files"]:
        fmt = f" ({f['format']} v{f['format_version']})" if f.get("format") else ""
        lines.append(f"  {f['name']:<28}{_size(f['bytes']):>12}{fmt}")
        if "problem" in f:
            lines.append(f"      cannot be read: {f['problem']}")
        arrays = f.get("arrays", [])
        name_w = max((len(a["name"]) for a in arrays), default=0) + 2
        shape_w = max((len(str(tuple(a["shape"]))) for a in arrays), default=0)
        for a in arrays:
            lines.append(f"      {a['name']:<{name_w}}{str(tuple(a['shape'])):>{shape_w}} {a['dtype']:<8}"
                         f"{_size(a['bytes']):>11}")
    return "\n".join(lines)


def cmd_checkpoint(args: argparse.Namespace) -> int:
    """`spacegraph checkpoint inspect`: prints, returns 0; 2 with one error line for bad input."""
    try:
        info = inspect_path(args.path)
    except InspectError as exc:
        print(f"spacegraph checkpoint inspect: {exc}", file=sys.stderr)
        return 2
    try:
        print(json.dumps(info, indent=1, default=str) if args.json else render(info, args.config), flush=True)
    except BrokenPipeError:  # (piped into head: the reader has what it wanted)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    for problem in info["problems"]:
        print(f"spacegraph checkpoint inspect: {problem}", file=sys.stderr)
    return 2 if info["problems"] else 0


def add_checkpoint_parser(sub: Any) -> argparse.ArgumentParser:
    """Adds ``spacegraph checkpoint`` (``inspect``) to the command's sub-parsers."""
    checkpoint = sub.add_parser("checkpoint", help="look into saved checkpoints (inspect)")
    actions = checkpoint.add_subparsers(dest="checkpoint_command", required=True)
    inspect = actions.add_parser(
        "inspect", help="print what a checkpoint holds, without building the agent",
        description="Prints what a checkpoint holds: agent, backend, format and format version (and whether this "
                    "spacegraph loads it), the spacegraph version that wrote it, counters (env steps, updates), "
                    "the config, and every file with its arrays (name, shape, dtype, bytes). Reads metadata and "
                    "array headers only: builds nothing, imports neither TensorFlow nor PyTorch. Exit status 0, or "
                    "2 for a path that is no checkpoint or a damaged file.")
    inspect.add_argument("path", metavar="PATH", help="a run directory (its newest readable checkpoint), a "
                                                      "checkpoint directory, or one saved .npz/.json file")
    inspect.add_argument("--config", action="store_true", help="print the whole config (default: a summary)")
    inspect.add_argument("--json", action="store_true", help="print JSON (the config whole) instead of text")
    inspect.set_defaults(fn=cmd_checkpoint)
    return inspect
