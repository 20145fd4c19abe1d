"""The words of the blind index: one rule for queries (str) and for the workers' hashing (bytes)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mailroom.store.search import blind_word_bytes, blind_words

# Letters that fold, decompose or separate in interesting ways, next to plain ASCII.
TRICKY = "aZé\u0301 \u00a0ßK\u212a’_-.@x9İΣς\u00ad\u200bｆ\ud800"


def test_words_are_folded_split_and_stripped_of_diacritics() -> None:
    text = "Grüße aus ZÜRICH, José’s café_bar — ﬁnal e\u0301te\u0301 ann@example.com"
    assert blind_words(text) == {
        "grusse", "aus", "zurich", "jose", "s", "cafe", "bar", "final", "ete",
        "ann", "example", "com",
    }  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=TRICKY, max_size=60) | st.text(max_size=60))
def test_the_bytes_form_is_the_str_form_encoded(text: str) -> None:
    """ASCII text takes a byte-level fast path, other text splits at ASCII first: both give
    exactly the query side's words, or a sealed message would miss a query word."""
    assert blind_word_bytes(text) == {word.encode("utf-8") for word in blind_words(text)}
