"""Every asv benchmark runs once (first parameter set) and follows asv's conventions.

Runs set ``SPACEGRAPH_BENCH_QUICK=1``, as ``run_offline.py --quick`` does: benchmarks
with a fixed work budget (DQN training) shrink it.
"""

import importlib
import inspect
import itertools
import os
import sys
from pathlib import Path

import pytest

BENCH_DIR = Path(__file__).resolve().parents[2] / "asv_bench" / "benchmarks"
PREFIXES = ("time_", "track_", "peakmem_", "mem_")


def _modules():
    return sorted(p for p in BENCH_DIR.glob("*.py") if p.name != "__init__.py")


def _load(path: Path):
    """The module as asv imports it: ``benchmarks.<name>`` (so ``from .common import ...`` works)."""
    if str(BENCH_DIR.parent) not in sys.path:
        sys.path.insert(0, str(BENCH_DIR.parent))
    return importlib.import_module(f"{BENCH_DIR.name}.{path.stem}")


def _benchmark_classes():
    for path in _modules():
        module = _load(path)
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and any(m.startswith(PREFIXES) for m in dir(cls)):
                yield pytest.param(cls, id=f"{path.stem}.{name}")


def test_no_imported_function_looks_like_a_benchmark():
    # asv takes every module-level function named time_*/track_*/... for a benchmark: an imported helper
    # such as `time_contenders` would fail `asv check` (wrong number of arguments).
    for path in _modules():
        module = _load(path)
        imported = [name for name, fn in inspect.getmembers(module, inspect.isfunction)
                    if name.startswith(PREFIXES) and fn.__module__ != module.__name__]
        assert not imported, f"{path.name} imports {imported}: import the module and call them through it"


def test_quick_grids_keep_every_backend_and_shrink(monkeypatch):
    common = _load(BENCH_DIR / "common.py")
    monkeypatch.delenv("SPACEGRAPH_BENCH_QUICK", raising=False)
    assert common.grid([1, 2, 4], [2]) == [1, 2, 4]
    monkeypatch.setenv("SPACEGRAPH_BENCH_QUICK", "1")
    assert common.grid([1, 2, 4], [2]) == [2]
    monkeypatch.setenv("SPACEGRAPH_BENCH_QUICK", "0")
    assert common.grid([1, 2, 4], [2]) == [1, 2, 4]


def test_benchmark_folder_is_not_empty():
    assert _modules(), f"no benchmark modules in {BENCH_DIR}"


@pytest.mark.parametrize("cls", list(_benchmark_classes()))
def test_params_match_param_names(cls):
    params = getattr(cls, "params", None)
    names = getattr(cls, "param_names", None)
    if params is None:
        assert names is None
        return
    grid = params if isinstance(params, (list, tuple)) and params and isinstance(params[0], (list, tuple)) else [params]
    assert names is not None and len(names) == len(grid), f"{cls.__name__}: params {params} vs param_names {names}"


@pytest.mark.parametrize("cls", list(_benchmark_classes()))
def test_benchmark_runs_once(cls, monkeypatch):
    monkeypatch.setenv("SPACEGRAPH_BENCH_QUICK", "1")
    params = getattr(cls, "params", None)
    grid = params if params and isinstance(params[0], (list, tuple)) else ([params] if params else [])
    backends = os.environ.get("SPACEGRAPH_BACKENDS", "tf,torch").split(",")
    combos = [c for c in itertools.product(*grid) if not (c and c[0] in ("tf", "torch") and c[0] not in backends)]
    # asv passes what setup_cache returns as the first argument to setup, the benchmarks and teardown.
    cache = (cls().setup_cache(),) if hasattr(cls, "setup_cache") else ()
    for combo in combos[:1] if grid else [()]:
        args = (*cache, *combo)
        bench = cls()
        if hasattr(bench, "setup"):
            try:
                bench.setup(*args)
            except NotImplementedError as exc:  # asv's way of skipping (e.g. a peer not installed)
                pytest.skip(f"{cls.__name__}{combo}: {exc}")
        for name in sorted(dir(bench)):
            if name.startswith(PREFIXES):
                result = getattr(bench, name)(*args)
                if name.startswith("track_"):
                    assert isinstance(result, (int, float)) and result == result, f"{name} returned {result!r}"
        if hasattr(bench, "teardown"):
            bench.teardown(*args)
