"""asv benchmarks of spacegraph (one module per area; see asv_bench/README.md).

When `asv_bench/run_offline.py` runs them it names the tree under test in
``SPACEGRAPH_BENCH_ROOT``; importing the package then checks that ``harness`` comes
from that tree, so a stale installed copy (the tox env installs an sdist) can never
be benchmarked in its place.
"""

import os

_ROOT = os.environ.get("SPACEGRAPH_BENCH_ROOT")
if _ROOT:
    import harness as _harness

    _where = os.path.realpath(_harness.__file__)
    if not _where.startswith(os.path.realpath(_ROOT) + os.sep):
        raise ImportError(f"asv_bench/benchmarks: harness is imported from {_where}, not from the tree under test "
                          f"{_ROOT} (SPACEGRAPH_BENCH_ROOT); put that tree first on PYTHONPATH (ASV_PYTHONPATH)")
