"""Tests of the runtime's parts: the actor lifecycle, the router, admission (`actors._runtime`)."""
