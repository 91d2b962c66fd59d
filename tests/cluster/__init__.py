"""Tests of `actors.cluster` on a real local Ray."""
