"""The behaviour every host offers, run against every host (`_suite`, over `_hosts`)."""
