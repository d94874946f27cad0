"""PyTorch 2 backend: parameters, op namespace and contracted define-by-run API calls."""
