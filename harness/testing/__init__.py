"""Test tooling shipped with the harness: hypothesis strategies for spaces and their values."""
