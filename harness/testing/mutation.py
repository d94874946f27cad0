"""A small AST mutation tester: does a test selection fail when one operator of a module changes?

`mutants(source)` lists the mutants of a module's source, one change each: arithmetic
swaps (``+``/``-``, ``*``/``/``, ``**`` to ``*``), comparison swaps (``<``/``<=``,
``>``/``>=``, ``==``/``!=``), boolean ``and``/``or`` swaps and ``not`` removal, integer
and float constants nudged (``c + 1``; ``0.5`` to ``0.6``), ``True``/``False`` flipped,
and statements removed (an expression statement or assignment replaced by ``pass``, a
``return x`` by ``return None``). Docstrings, ``assert`` and ``raise`` statements are
left alone: mutating error paths tests the messages, not the behaviour.

`run_mutant` runs a pytest command in a subprocess whose interpreter sees the mutated
module in place of the original (a meta-path finder installed by
``harness.testing.mutation_hook`` through ``-p``), so the files on disk never change and
other processes using the tree are not disturbed. A mutant is *killed* when pytest
exits non-zero, *survived* when it exits 0, *timeout* when it runs past its limit.
"""

from __future__ import annotations

import ast
import copy
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Iterator, Sequence

ARITH = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.Pow: ast.Mult,
         ast.FloorDiv: ast.Div, ast.Mod: ast.FloorDiv}
COMPARE = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
           ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}
BOOL = {ast.And: ast.Or, ast.Or: ast.And}


@dataclass
class Mutant:
    """One change: ``index`` is its place in `mutants`' order, ``line`` the source line, ``what`` says what changed.

    ``key`` names the change by its content (see `content_key`), so it stays the same when code
    elsewhere in the module changes; ``index`` and ``line`` do not.
    """

    index: int
    line: int
    operator: str
    what: str
    key: str = ""


@dataclass
class Outcome:
    """A mutant's run: ``status`` is ``killed``, ``survived`` or ``timeout``; ``seconds`` its wall time.

    ``backends`` maps each backend run, in run order, to its status there (empty when the run
    named no backend); ``status`` is the first of them that is not ``survived``, else ``survived``.
    """

    module: str
    mutant: Mutant
    status: str
    seconds: float
    backends: dict[str, str] = field(default_factory=dict)

    @property
    def killed_by(self) -> str | None:
        """The first backend whose run killed the mutant (or timed out), None when it survived them all."""
        return next((b for b, s in self.backends.items() if s != "survived"), None)

    @property
    def full_key(self) -> str:
        """``module:key``: the mutant's name in ``equivalent.json`` and for ``--mutants``."""
        return f"{self.module}:{self.mutant.key}"


def _docstring_nodes(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(
                    first.value.value, str):
                out.add(id(first))
    return out


def _skipped(tree: ast.AST) -> set[int]:
    """ids of nodes under ``assert``/``raise`` statements, docstrings and f-strings (never mutated)."""
    out = set()
    roots = [n for n in ast.walk(tree) if isinstance(n, (ast.Assert, ast.Raise, ast.JoinedStr))]
    docs = _docstring_nodes(tree)
    roots += [n for n in ast.walk(tree) if id(n) in docs]
    for root in roots:
        out.update(id(n) for n in ast.walk(root))
    return out


def _sites(tree: ast.AST) -> Iterator[tuple[ast.AST, str, str, Any]]:
    """(node, operator, description, apply) for every place a mutant can be made, in a fixed order."""
    skipped = _skipped(tree)
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in ARITH:
            new = ARITH[type(node.op)]
            yield node, "arith", f"{type(node.op).__name__} -> {new.__name__}", ("op", new())
        elif isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                if type(op) in COMPARE:
                    new = COMPARE[type(op)]
                    yield node, "compare", f"{type(op).__name__} -> {new.__name__}", ("cmp", i, new())
        elif isinstance(node, ast.BoolOp):
            new = BOOL[type(node.op)]
            yield node, "bool", f"{type(node.op).__name__} -> {new.__name__}", ("op", new())
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            yield node, "not", "not x -> x", ("unnot",)
        elif isinstance(node, ast.Constant) and type(node.value) in (bool, int, float):
            v = node.value
            new = (not v) if isinstance(v, bool) else (v + 1 if isinstance(v, int) else (v * 1.2 if v else 1.0))
            yield node, "constant", f"{v!r} -> {new!r}", ("value", new)
        elif isinstance(node, (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign)) and not (
                isinstance(node, ast.AnnAssign) and node.value is None):
            yield node, "statement", "statement removed", ("pass",)
        elif isinstance(node, ast.Return) and node.value is not None and not (
                isinstance(node.value, ast.Constant) and node.value.value is None):
            yield node, "return", "return x -> return None", ("return_none",)


def _apply(tree: ast.Module, index: int) -> ast.Module:
    tree = copy.deepcopy(tree)
    for i, (node, _, _, change) in enumerate(_sites(tree)):
        if i != index:
            continue
        kind = change[0]
        if kind == "op":
            node.op = change[1]
        elif kind == "cmp":
            node.ops[change[1]] = change[2]
        elif kind == "value":
            node.value = change[1]
        elif kind in ("pass", "unnot", "return_none"):
            replacement: ast.AST = (ast.Pass() if kind == "pass" else node.operand if kind == "unnot"
                                    else ast.Return(value=ast.Constant(value=None)))
            for parent in ast.walk(tree):
                for field, value in ast.iter_fields(parent):
                    if isinstance(value, list) and any(v is node for v in value):
                        value[[j for j, v in enumerate(value) if v is node][0]] = replacement
                    elif value is node:
                        setattr(parent, field, replacement)
            ast.copy_location(replacement, node)
        return ast.fix_missing_locations(tree)
    raise IndexError(f"mutation: no mutant {index}; the module has {len(list(_sites(tree)))}")


def _scopes_and_parents(tree: ast.AST) -> tuple[dict[int, str], dict[int, ast.AST]]:
    """ids of nodes -> the dotted name of the class/function enclosing them (``<module>`` at top), and -> parent."""
    scopes: dict[int, str] = {}
    parents: dict[int, ast.AST] = {}
    stack: list[tuple[ast.AST, str]] = [(tree, "")]
    while stack:
        node, scope = stack.pop()
        scopes[id(node)] = scope or "<module>"
        inner = f"{scope}.{node.name}".lstrip(".") if isinstance(
            node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else scope
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
            stack.append((child, inner))
    return scopes, parents


def _changed_text(context: ast.AST, node: ast.AST, change: tuple) -> str:
    """The source of ``context`` (``node`` or its parent) once ``change`` is made to ``node``."""
    kind = change[0]
    if kind in ("pass", "unnot", "return_none"):  # context is node itself for these
        return "pass" if kind == "pass" else ("return None" if kind == "return_none"
                                              else ast.unparse(node.operand))  # type: ignore[attr-defined]
    position = next(i for i, n in enumerate(ast.walk(context)) if n is node)
    changed = copy.deepcopy(context)
    target: Any = next(n for i, n in enumerate(ast.walk(changed)) if i == position)
    if kind == "op":
        target.op = change[1]
    elif kind == "cmp":
        target.ops[change[1]] = change[2]
    else:
        target.value = change[1]
    return ast.unparse(changed)


def content_key(scope: str, operator: str, before: str, after: str) -> str:
    """``scope:operator:before -> after``, whitespace runs collapsed: a mutant's name by content.

    ``scope`` is the enclosing ``Class.method`` (``<module>`` at top level); ``before``/``after``
    the source of the mutated node (of its parent expression for a constant, so ``n - 1 -> n - 2``,
    not ``1 -> 2``; ``x.sum(axis=-1)``, not ``-1``) before and after the change. `mutants` appends
    `` #2``, `` #3``... to the second, third... mutant of one module with the same key, in source order.
    """
    return " ".join(f"{scope}:{operator}:{before} -> {after}".split())


def mutants(source: str) -> list[Mutant]:
    """Every mutant of ``source``, in a fixed order (`Mutant.index` is the position), each with its content key."""
    tree = ast.parse(source)
    scopes, parents = _scopes_and_parents(tree)
    out = []
    for i, (node, op, what, change) in enumerate(_sites(tree)):
        context = _constant_context(node, parents) if isinstance(node, ast.Constant) else node
        key = content_key(scopes[id(node)], op, ast.unparse(context), _changed_text(context, node, change))
        line = getattr(node, "lineno", 0)
        out.append((line, getattr(node, "col_offset", 0), Mutant(i, line, op, what, key)))
    seen: dict[str, int] = {}
    for _, _, mutant in sorted(out, key=lambda t: (t[0], t[1], t[2].index)):  # duplicates numbered in source order
        seen[mutant.key] = seen.get(mutant.key, 0) + 1
        mutant.key += f" #{seen[mutant.key]}" if seen[mutant.key] > 1 else ""
    return [mutant for _, _, mutant in out]


_LITERAL_PARTS = (ast.UnaryOp, ast.Tuple, ast.List, ast.Slice)


def _constant_context(node: ast.AST, parents: dict[int, ast.AST]) -> ast.AST:
    """The expression a constant sits in: up through ``-1``, ``(0, 1)``, ``1:``, then one more expression/keyword."""
    while isinstance(parents.get(id(node)), _LITERAL_PARTS):
        node = parents[id(node)]
    parent = parents.get(id(node))
    return parent if isinstance(parent, (ast.expr, ast.keyword)) else node


def mutated_source(source: str, index: int) -> str:
    """``source`` with mutant ``index`` applied (as code, via `ast.unparse`)."""
    return ast.unparse(_apply(ast.parse(source), index))


_PYTEST_EXITS = {3: "internal error", 4: "usage error", 5: "no tests collected"}


def run_mutant(module: str, path: str, index: int, pytest_args: Sequence[str], timeout: float,
               env: dict[str, str] | None = None, cwd: str | None = None) -> str:
    """Runs ``python -m pytest -p harness.testing.mutation_hook *pytest_args`` with mutant ``index`` of ``module``.

    Args:
        module: the dotted module name the tests import.
        path: its source file.
        index: the mutant (see `mutants`).
        pytest_args: the test selection and options (``-x -q suites/... -k ...``).
        timeout: seconds before the run is stopped and counted as ``timeout``.
        env, cwd: the subprocess's environment (default: this one's) and folder.

    Returns:
        ``killed`` (pytest exits 1, a test failed, or 2, collection failed: the mutant broke an import),
        ``survived`` (exits 0) or ``timeout``.

    Raises:
        RuntimeError: pytest exited 3 (internal error), 4 (usage error: a bad path or option) or 5 (no test
            collected): the selection is at fault, not the mutant, so it is never counted as killed.
    """
    full_env = dict(os.environ if env is None else env)
    full_env["SPACEGRAPH_MUTANT"] = json.dumps({"module": module, "path": path, "index": index})
    return _run_pytest(pytest_args, timeout, full_env, cwd, f"mutant {index} of {module}")


def run_unmutated(pytest_args: Sequence[str], timeout: float, env: dict[str, str] | None = None,
                  cwd: str | None = None) -> str:
    """Runs the selection on the unchanged code: ``survived`` (it passes), ``killed`` (it fails) or ``timeout``.

    A selection must pass here before its mutants are run: otherwise every mutant of it would count as killed.
    Raises `RuntimeError` as `run_mutant` does.
    """
    full_env = dict(os.environ if env is None else env)
    full_env.pop("SPACEGRAPH_MUTANT", None)
    return _run_pytest(pytest_args, timeout, full_env, cwd, "the unmutated code")


def _run_pytest(pytest_args: Sequence[str], timeout: float, env: dict[str, str], cwd: str | None, what: str) -> str:
    argv = [sys.executable, "-m", "pytest", "-p", "harness.testing.mutation_hook", *pytest_args]
    try:
        proc = subprocess.run(argv, env=env, cwd=cwd, timeout=timeout, capture_output=True)
    except subprocess.TimeoutExpired:
        return "timeout"
    if proc.returncode in (0, 1, 2):
        return "survived" if proc.returncode == 0 else "killed"
    tail = (proc.stdout or b"").decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
    why = _PYTEST_EXITS.get(proc.returncode, "unknown")
    raise RuntimeError(f"run_mutant: pytest exited {proc.returncode} ({why}) for {what} "
                       f"with {list(pytest_args)}: {tail[0]}")


def outcomes_json(outcomes: list[Outcome]) -> list[dict[str, Any]]:
    """The outcomes as JSON-ready dicts (with ``killed_by``: the first backend that killed the mutant)."""
    return [{**asdict(o), "mutant": asdict(o.mutant), "killed_by": o.killed_by} for o in outcomes]


def outcomes_from_json(rows: list[dict[str, Any]]) -> list[Outcome]:
    """`outcomes_json`'s rows back as outcomes (``killed_by`` is recomputed from ``backends``)."""
    return [Outcome(r["module"], Mutant(**r["mutant"]), r["status"], r["seconds"], dict(r.get("backends", {})))
            for r in rows]


def timed(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
    """``(fn(...), seconds)``."""
    start = time.perf_counter()
    return fn(*args, **kwargs), time.perf_counter() - start
