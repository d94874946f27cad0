"""The argument types of the `spacegraph` command line: a bad value is an argparse error naming what was
expected and what came."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive int; got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive int; got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an int >= 0; got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an int >= 0; got {text!r}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number; got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number; got {text!r}")
    return value


def finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number; got {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"expected a finite number; got {text!r}")
    return value
