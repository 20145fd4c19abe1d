"""Reply prefixes and the subject key of the subject rescue."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from mailroom.conversations.subject import (
    REPLY_PREFIXES,
    is_reply,
    normalized_subject,
    split_subject,
    subject_key,
)


@pytest.mark.parametrize("prefix", REPLY_PREFIXES)
def test_every_listed_prefix_is_a_reply_in_any_case(prefix: str) -> None:
    """Each listed prefix marks a reply, in lower, upper and title case."""
    for variant in (prefix, prefix.upper(), prefix.title()):
        assert split_subject(f"{variant}: Budget 2024") == (True, "Budget 2024")


@pytest.mark.parametrize(
    ("subject", "core"),
    [
        ("Re[2]: Budget", "Budget"),
        ("RE(3): Budget", "Budget"),
        ("Re^2: Budget", "Budget"),
        ("AW: Re: Budget", "Budget"),
        ("Re: Re: Re: Budget", "Budget"),
        ("[list] Re: Budget", "Budget"),
        ("Re: [list] Re: Budget", "Budget"),
        ("[ILUG] RE: [ILUG] Budget", "Budget"),
        ("Re : Budget", "Budget"),
        ("SV：Budget", "Budget"),
        ("Fwd:   Budget   plan ", "Budget plan"),
        ("Budget (fwd)", "Budget"),
        ("WG: AW: Antw: Doorst: Budget", "Budget"),
    ],
)
def test_bracketed_repeated_and_counted_forms(subject: str, core: str) -> None:
    """Counters, repeats, list tags and full-width colons are stripped and count as replies."""
    assert split_subject(subject) == (True, core)


@pytest.mark.parametrize(
    "subject",
    [
        "Budget",
        "[list] Budget",
        "Regarding: Budget",
        "Reply needed",
        "Tractor sale",
        "Resume: attached",
        "Re Budget",
        "",
    ],
)
def test_words_that_only_look_like_prefixes_are_not_replies(subject: str) -> None:
    """A prefix must be a whole word followed by a colon; a list tag alone is no reply."""
    assert not is_reply(subject)


def test_a_subject_of_only_a_tag_keeps_its_text() -> None:
    """A subject that is nothing but a tag is its own key, not an empty one."""
    assert normalized_subject("[list]") == "[list]"


def test_keys_are_case_folded_and_prefix_free() -> None:
    """Reply and original share one key; different subjects do not; empty gives none."""
    assert subject_key("AW: [ilug] Re: PLAN") == subject_key("Plan") == subject_key("[ilug] plan")
    assert subject_key("Plan") != subject_key("Plans")
    assert subject_key("Re:") is None


@given(st.text(max_size=60), st.lists(st.sampled_from(["Re: ", "AW: ", "[x] ", "Fwd: "])))
def test_prefixing_never_changes_the_key(text: str, prefixes: list[str]) -> None:
    """Any run of prefixes and tags before a non-empty subject leaves its key unchanged."""
    base = normalized_subject(text)
    assume(base)
    assert normalized_subject("".join(prefixes) + base) == normalized_subject(base)
