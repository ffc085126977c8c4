"""Benchmarks: a timing core and the measurements built on it."""
