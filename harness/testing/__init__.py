"""Test tooling shipped with the harness: hypothesis strategies for spaces and their values."""
from harness.testing.component_test import ComponentTest
