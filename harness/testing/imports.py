"""Import contracts: layers that import only downward, and no import cycles between modules.

A small AST walk, no third-party tool: every ``import``/``from ... import`` of a module is read,
including imports inside functions (a lazy import still makes one module depend on another),
except those under ``if TYPE_CHECKING:`` (they never run). Relative imports are resolved
against the importing module.

Use::

    graph = import_graph(["harness", "reference_agents", "spacegraph"], root=".")
    problems = check_layers(graph, [["spacegraph"], ["reference_agents"], ["harness"]])
    problems += check_cycles(graph)
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence


@dataclass(frozen=True)
class ImportEdge:
    """``importer`` imports ``imported`` at ``file:line``."""

    importer: str
    imported: str
    file: str
    line: int


@dataclass
class ImportGraph:
    """Modules found under the scanned packages and the import edges between them."""

    modules: dict[str, Path] = field(default_factory=dict)
    edges: list[ImportEdge] = field(default_factory=list)

    def resolve(self, name: str) -> str | None:
        """The longest scanned module that ``name`` (``a.b.c`` or ``a.b.c.attr``) refers to."""
        parts = name.split(".")
        while parts:
            candidate = ".".join(parts)
            if candidate in self.modules:
                return candidate
            parts.pop()
        return None


def _module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, module: str, is_package: bool) -> Iterable[tuple[str, int]]:
    """``(imported name, line)`` for every runtime import in ``tree``."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for inner in node.body:
                skip.update(id(n) for n in ast.walk(inner))
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".") if package else []
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            for alias in node.names:
                yield (f"{prefix}.{alias.name}" if alias.name != "*" else prefix), node.lineno


def import_graph(packages: Sequence[str], root: str | os.PathLike = ".") -> ImportGraph:
    """Scans the ``.py`` files of ``packages`` (folders under ``root``) for imports between them."""
    root = Path(root).resolve()
    graph = ImportGraph()
    files: list[tuple[str, Path]] = []
    for package in packages:
        folder = root / package.replace(".", os.sep)
        if not folder.is_dir():
            raise ValueError(f"import_graph: package {package!r} is not a folder under {root}")
        for path in sorted(folder.rglob("*.py")):
            name = _module_name(path, root)
            graph.modules[name] = path
            files.append((name, path))
    for name, path in files:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except SyntaxError as exc:
            raise ValueError(f"import_graph: cannot parse {path}: {exc}") from exc
        for imported, line in _imports(tree, name, path.name == "__init__.py"):
            target = graph.resolve(imported)
            if target is not None and target != name:
                graph.edges.append(ImportEdge(name, target, str(path.relative_to(root)), line))
    return graph


def _layer_of(module: str, layers: Sequence[Sequence[str]]) -> int | None:
    """The index of the layer whose prefix matches ``module`` most specifically (0 = top)."""
    best: tuple[int, int] | None = None
    for index, prefixes in enumerate(layers):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[1]:
                    best = (index, len(prefix))
    return None if best is None else best[0]


def check_layers(graph: ImportGraph, layers: Sequence[Sequence[str]]) -> list[str]:
    """Upward imports: a module of layer ``i`` importing one of a layer above it (index ``< i``).

    ``layers`` lists module prefixes from the top layer down; a module belongs to the layer of its
    longest matching prefix, so ``["harness"]`` below ``["harness.testing"]`` orders sub-packages.
    Modules in no layer are not checked. Imports within one layer are free (cycles are checked apart).
    """
    problems = []
    for edge in graph.edges:
        src, dst = _layer_of(edge.importer, layers), _layer_of(edge.imported, layers)
        if src is not None and dst is not None and dst < src:
            problems.append(f"{edge.file}:{edge.line}: {edge.importer} (layer {'/'.join(layers[src])}) imports "
                            f"{edge.imported} from the layer above it ({'/'.join(layers[dst])})")
    return problems


def check_cycles(graph: ImportGraph) -> list[str]:
    """Import cycles between modules, each reported once with the edges that close it.

    A package's ``__init__`` importing its own sub-modules (to re-export them) is not a cycle
    by itself: edges from a package to modules inside it are left out.
    """
    adjacency: dict[str, dict[str, ImportEdge]] = {m: {} for m in graph.modules}
    for edge in graph.edges:
        if edge.imported.startswith(edge.importer + ".") and graph.modules[edge.importer].name == "__init__.py":
            continue
        adjacency[edge.importer].setdefault(edge.imported, edge)
    # Tarjan's strongly connected components, iteratively.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for start in sorted(adjacency):
        if start in index:
            continue
        work = [(start, iter(sorted(adjacency[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(adjacency[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                members = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.append(member)
                    if member == node:
                        break
                if len(members) > 1:
                    components.append(sorted(members))
    problems = []
    for members in sorted(components):
        inside = set(members)
        edges = [e for m in members for t, e in sorted(adjacency[m].items()) if t in inside]
        where = "; ".join(f"{e.importer} -> {e.imported} ({e.file}:{e.line})" for e in edges)
        problems.append(f"import cycle between {', '.join(members)}: {where}")
    return problems
