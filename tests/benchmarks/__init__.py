"""Tests of the benchmarks' peers."""
