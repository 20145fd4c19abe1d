"""Conversations: assigning messages to threads and merging threads."""
