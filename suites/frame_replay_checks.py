"""Checks the frame replay tests share (`suites/components/test_host_frame_replay.py`, `suites/library/test_frame_replay.py`).

Import them as ``from suites.frame_replay_checks import fill, assert_layout, ...``.
"""

from __future__ import annotations

import numpy as np

from reference_agents.components.memories.host_frame_replay import LAYOUTS
from reference_agents.oracles.frame_replay import stack_records


def fill(store, rows, chunk, oracle=None):
    for i in range(0, len(rows), chunk):
        store.add(stack_records(rows[i:i + chunk]))
        if oracle is not None:
            oracle.add(rows[i:i + chunk])


def assert_layout(records, layout):
    """``nhwc`` stacks are C-contiguous; ``nchw_view`` stacks are views, channel-first in memory."""
    for key in ("states", "next_states"):
        arr = records[key]
        if layout == "nhwc":
            assert arr.flags.c_contiguous, key
        elif arr.shape[0] and arr.shape[-1] > 1:
            assert not arr.flags.c_contiguous and np.moveaxis(arr, -1, 1).flags.c_contiguous, key


def assert_records_equal(got, want):
    for key in want:
        assert got[key].dtype == want[key].dtype and got[key].shape == want[key].shape, key
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)


def assert_valid_equal_oracle(store, oracle):
    """Every valid transition, in every layout, equals the oracle's byte for byte."""
    valid = np.flatnonzero(store.index.valid)
    if not valid.size:
        return valid  # (the oracle cannot stack nothing)
    want = oracle.records_at(valid)
    for layout in LAYOUTS:
        got = store.records_at(valid, layout=layout)
        assert_layout(got, layout)
        assert_records_equal(got, want)
    return valid
