"""The compose page's parts: the form, drafts stored the JMAP way, answers to a message."""
