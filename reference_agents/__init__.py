"""Reference agents assembled from spacegraph components."""
