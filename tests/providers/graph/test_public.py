"""What mailroom.providers.graph makes public is a decision: the list is pinned here."""

from __future__ import annotations

import mailroom.providers.graph as graph


def test_public_names_resolve_and_are_the_chosen_ones() -> None:
    """Every name in __all__ resolves, and __all__ is exactly the client and its values."""
    assert len(set(graph.__all__)) == len(graph.__all__)
    assert set(graph.__all__) == {
        "SHARED_LIMITER",
        "BatchRequest",
        "BatchResult",
        "DeltaPage",
        "FolderExistsError",
        "GraphClient",
        "GraphFolder",
        "GraphMessage",
        "MailboxLimiter",
        "NotFoundError",
        "Removal",
        "TokenSource",
    }
    for name in graph.__all__:
        assert getattr(graph, name) is not None
