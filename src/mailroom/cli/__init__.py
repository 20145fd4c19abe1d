"""The ``mailroom`` command line."""
