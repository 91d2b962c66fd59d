"""Tests of the programs in ``examples/``, run as their docs pages say."""
