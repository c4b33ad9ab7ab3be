"""Benchmarks (``make bench``): measured figures, printed as tables."""
