"""Tests of clients."""
