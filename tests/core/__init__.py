"""Tests of the runtime core (`actors`, `protocol`)."""
