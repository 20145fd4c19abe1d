"""Labels: the one mechanism for folders, system states and user tags."""
