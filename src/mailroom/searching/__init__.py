"""Searching mail with the query syntax people know from Gmail.

* :mod:`.syntax` — the query text into a tree of terms (``from:ann -is:read
  (invoice OR receipt)``); bad syntax is a :class:`~.syntax.QueryError` in
  one plain sentence.
* :mod:`.filters` — the tree into a JMAP ``Email/query`` filter, with the
  user's labels, clock and time zone (spam and trash left out unless asked
  for), so the search runs on the engine JMAP uses (full-text index included).
* :mod:`.results` — one page of matching threads, newest first, with
  snippets of where the words occur.
"""
