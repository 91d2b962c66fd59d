"""Tests of the state stores (`actors.store`)."""
