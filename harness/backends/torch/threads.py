"""PyTorch's CPU thread pools (imports only torch)."""

from __future__ import annotations

import torch


def set_threads(threads: int, inter_op: bool = True) -> bool:
    """Sets the intra-op (and, with ``inter_op``, the inter-op) pool to ``threads``.

    The inter-op pool can be set only before the first parallel work.

    Returns:
        True if the pools now have ``threads`` (set now, or already so).
    """
    torch.set_num_threads(threads)
    if inter_op:
        try:
            torch.set_num_interop_threads(threads)
        except RuntimeError:  # only allowed before the first parallel work
            return torch.get_num_interop_threads() == threads
    return True


def get_threads() -> dict[str, int]:
    """``{"intra_op": n, "inter_op": n}``."""
    return {"intra_op": torch.get_num_threads(), "inter_op": torch.get_num_interop_threads()}
