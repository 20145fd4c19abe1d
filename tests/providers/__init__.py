"""Provider contract suite."""
