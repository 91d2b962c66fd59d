"""Tests of isolation."""
