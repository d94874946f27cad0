"""Versioned file formats: every file spacegraph saves for later (agent checkpoints, replay shard snapshots,
trainer states, exported models) names its format, the format's version (an int per format) and the project
version that wrote it, in metadata built by ONE helper, `stamp`. Reading one checks the version first
(`upgrade`): the current version loads; an older one is migrated by the functions registered for it
(`register_migration`, applied in order) or refused; a newer one is refused. A refusal is one `BadFileError`
naming the file, what it is, its format version and the spacegraph version that wrote it, the versions this code
reads and what to do.

A file written before formats carried a version (no ``format_version`` key) is format 1 of its format: what the
code wrote then is what format 1 is.

Formats are declared where their files are written (`declare_format`); a format nobody declared (a user's agent
that declares none) is read without a version check.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np

import harness
from harness.execution.bad_file import BadFileError, FormatVersionError

#: The version of spacegraph that writes files now (recorded in each as ``spacegraph``).
PROJECT_VERSION = harness.__version__
#: The metadata key holding a file's format version.
VERSION_KEY = "format_version"
#: The metadata key holding the spacegraph version that wrote a file.
WRITER_KEY = "spacegraph"

#: ``fn(meta, arrays) -> (meta, arrays)``: turns a file of format version N into version N + 1.
Migration = Callable[[dict[str, Any], dict[str, np.ndarray]], tuple[dict[str, Any], dict[str, np.ndarray]]]


@dataclasses.dataclass
class FileFormat:
    """One kind of file and the version of it this code writes.

    Args:
        name: the ``format`` its metadata names (``"spacegraph-dqn-checkpoint"``).
        version: the format version written now (1 is what was written before versions were recorded).
        kind: what such a file is, for messages (``"a DQN checkpoint"``).
        migrations: ``{from_version: fn}`` turning version ``from_version`` into ``from_version + 1``.
    """

    name: str
    version: int
    kind: str
    migrations: dict[int, Migration] = dataclasses.field(default_factory=dict)

    def oldest_readable(self) -> int:
        """The oldest version that loads: the current one, or older as far as migrations reach back unbroken."""
        oldest = self.version
        while oldest - 1 in self.migrations:
            oldest -= 1
        return oldest

    def readable(self) -> str:
        """The versions this code reads, in words (``"format 2"``, ``"formats 1 to 3"``)."""
        oldest = self.oldest_readable()
        return f"format {self.version}" if oldest == self.version else f"formats {oldest} to {self.version}"


#: The declared formats by name.
FORMATS: dict[str, FileFormat] = {}


def declare_format(name: str, version: int, kind: str) -> FileFormat:
    """Declares (or re-declares, keeping its migrations) the format ``name`` written at ``version``.

    Raises:
        ValueError: for a version that is not an int >= 1.
    """
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ValueError(f"declare_format({name!r}): version must be an int >= 1; got {version!r}")
    known = FORMATS.get(name)
    FORMATS[name] = FileFormat(name, version, kind, dict(known.migrations) if known else {})
    return FORMATS[name]


def register_migration(name: str, from_version: int, fn: Migration) -> None:
    """Registers ``fn`` to turn files of format ``name`` at ``from_version`` into ``from_version + 1``.

    Raises:
        ValueError: for an undeclared format, or a ``from_version`` not below the current version.
    """
    fmt = FORMATS.get(name)
    if fmt is None:
        raise ValueError(f"register_migration: format {name!r} is not declared (declared: {sorted(FORMATS)})")
    if not isinstance(from_version, int) or not 1 <= from_version < fmt.version:
        raise ValueError(f"register_migration({name!r}): from_version must be an int from 1 to {fmt.version - 1} "
                         f"(the format is at version {fmt.version}); got {from_version!r}")
    fmt.migrations[from_version] = fn


def stamp(name: str, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """The metadata of a file of format ``name``: ``format``, ``format_version`` (the declared version; 1 for a
    format nobody declared, e.g. a user's agent's) and ``spacegraph`` (the project version writing it) first,
    then ``meta``.

    Raises:
        ValueError: for a name that is no non-empty string, or ``meta`` that sets one of those three keys.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"stamp: a format is a non-empty string; got {name!r}")
    clash = sorted({"format", VERSION_KEY, WRITER_KEY} & set(meta or {}))
    if clash:
        raise ValueError(f"stamp({name!r}): meta must not set {clash}: the stamp writes them")
    fmt = FORMATS.get(name)
    return {"format": name, VERSION_KEY: fmt.version if fmt else 1, WRITER_KEY: PROJECT_VERSION, **(meta or {})}


def saved_version(path: str, meta: dict[str, Any]) -> int:
    """The format version ``meta`` (a file's metadata) records: 1 when it records none (written before versions).

    Raises:
        BadFileError: naming ``path`` when the version is not an int >= 1.
    """
    version = meta.get(VERSION_KEY, 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise BadFileError(path, f"has {VERSION_KEY} = {str(version)[:40]!r} in its metadata, expected an int >= 1")
    return version


def writer(meta: dict[str, Any]) -> str:
    """The spacegraph version that wrote a file, in words."""
    found = meta.get(WRITER_KEY)
    return f"spacegraph {found}" if isinstance(found, str) else "a spacegraph that recorded no versions"


def version_status(meta: dict[str, Any]) -> tuple[str, str]:
    """Whether this code reads a file with metadata ``meta``, without reading it: ``(status, words)``, status one
    of ``current``, ``migrates``, ``too-old``, ``too-new``, ``undeclared`` (a format nobody declared) or
    ``bad-version``."""
    fmt = FORMATS.get(meta.get("format"))  # type: ignore[arg-type]
    if fmt is None:
        return "undeclared", f"format {meta.get('format')!r} is none this spacegraph declares (read unchecked)"
    found = meta.get(VERSION_KEY, 1)
    if not isinstance(found, int) or isinstance(found, bool) or found < 1:
        return "bad-version", f"{VERSION_KEY} {str(found)[:40]!r} is no int >= 1"
    if found == fmt.version:
        return "current", f"the current format: spacegraph {PROJECT_VERSION} loads it"
    if found > fmt.version:
        return "too-new", f"newer than spacegraph {PROJECT_VERSION} reads ({fmt.readable()}): upgrade spacegraph"
    if found >= fmt.oldest_readable():
        return "migrates", f"older: spacegraph {PROJECT_VERSION} migrates it to format {fmt.version} when loading"
    return "too-old", f"older than spacegraph {PROJECT_VERSION} reads ({fmt.readable()}): re-train, or use the " \
                      f"spacegraph version that wrote it"


def upgrade(path: str, meta: dict[str, Any], arrays: dict[str, np.ndarray] | None = None
            ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """A file's metadata and arrays at the current version of its format, migrated when older.

    A format nobody declared passes as it is. The migrated metadata records ``migrated_from``.

    Raises:
        FormatVersionError: (a `BadFileError`) naming ``path``, what it is, its format version and writer, the
            versions read here and what to do, when it is newer than this code or older than any migration reaches.
        BadFileError: naming ``path`` when its format version is not an int >= 1.
    """
    arrays = {} if arrays is None else arrays
    fmt = FORMATS.get(meta.get("format"))  # type: ignore[arg-type]
    if fmt is None:
        return meta, arrays
    found = saved_version(path, meta)
    if found == fmt.version:
        return meta, arrays
    told = f"is {fmt.kind} in format {found}, written by {writer(meta)}; this is spacegraph {PROJECT_VERSION}, " \
           f"reading {fmt.readable()} of it"
    if found > fmt.version:
        raise FormatVersionError(path, f"{told}: upgrade spacegraph to load it")
    if found < fmt.oldest_readable():
        raise FormatVersionError(path, f"{told} (no migration from format {found}): re-train, or keep using it "
                                       f"with the spacegraph version that wrote it")
    meta, arrays = dict(meta), dict(arrays)
    for step in range(found, fmt.version):
        meta, arrays = fmt.migrations[step](meta, arrays)
    meta.update({VERSION_KEY: fmt.version, "migrated_from": found})
    return meta, arrays

