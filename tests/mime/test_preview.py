"""Previews: quotes and signatures trimmed, whitespace collapsed, length capped."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mailroom.mime import html_to_text, make_preview


def test_quotes_attribution_and_signature_are_trimmed() -> None:
    """Quoted lines, the 'wrote:' line introducing them, and the signature are dropped."""
    text = (
        "Sounds good,\n   see you then.\n\nOn Mon, 1 Jan 2024, Bob wrote:\n"
        "> Lunch at noon?\n> \n-- \nAlice\nACME Corp\n"
    )
    assert make_preview(text) == "Sounds good, see you then."


def test_outlook_original_message_block_is_trimmed() -> None:
    """Everything from an Outlook-style original-message marker on is dropped."""
    text = "Thanks!\n\n-----Original Message-----\nFrom: Bob\nSent: Monday\n\nOld text"
    assert make_preview(text) == "Thanks!"
    text = "Fine.\n________________________________\nFrom: Bob <b@x>\nSent: Monday\n"
    assert make_preview(text) == "Fine."


def test_a_message_that_is_only_a_quote_still_gets_a_preview() -> None:
    """When trimming leaves nothing, the untrimmed text is used."""
    assert make_preview("> only quoted\n> text") == "> only quoted > text"


def test_long_text_is_cut_with_an_ellipsis_within_the_limit() -> None:
    """Long text is cut at a word boundary and ends with an ellipsis, within the limit."""
    preview = make_preview("word " * 200, limit=50)
    assert len(preview) <= 50
    assert preview.endswith("…")
    assert preview.startswith("word word")


def test_html_is_used_when_text_is_blank() -> None:
    """Without plain text, the preview comes from the HTML's text, scripts and styles excluded."""
    html = "<style>p{}</style><p>Hello&nbsp;<b>there</b></p><script>x()</script><p>again</p>"
    assert make_preview("  \n ", html) == "Hello there again"


def test_html_to_text_keeps_block_structure() -> None:
    """Block tags become line breaks (blank lines around paragraphs), cells are spaced."""
    html = "<h1>Title</h1><p>a &amp; b</p><table><tr><td>x</td><td>y</td></tr></table>x<br>y"
    assert html_to_text(html) == "Title\n\na & b\n\nx y\nx\ny"


def test_limit_zero_or_negative_gives_empty_preview() -> None:
    """A non-positive limit yields an empty preview."""
    assert make_preview("text", limit=0) == ""
    assert make_preview("text", limit=-3) == ""


@settings(max_examples=200, deadline=None, database=None)
@given(
    text=st.one_of(st.none(), st.text(max_size=600)),
    html=st.one_of(st.none(), st.text(max_size=300)),
    limit=st.integers(min_value=-5, max_value=300),
)
def test_preview_is_always_short_and_single_line(
    text: str | None, html: str | None, limit: int
) -> None:
    """Any input gives at most ``limit`` characters, with no line breaks or doubled spaces."""
    preview = make_preview(text, html, limit)
    assert len(preview) <= max(limit, 0)
    assert "\n" not in preview
    assert "  " not in preview
