"""Components, oracles and models for testing the spec harness (importable as ``broken``; see ``../conftest.py``)."""
