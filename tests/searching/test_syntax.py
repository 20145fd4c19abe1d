"""The search syntax: what each query parses to, and a plain sentence for every mistake."""

from __future__ import annotations

from datetime import date

import pytest

from mailroom.errors import MailroomError
from mailroom.searching.syntax import (
    MAX_LENGTH,
    MAX_NESTING,
    MAX_TERMS,
    All,
    Either,
    Not,
    QueryError,
    Term,
    age_of,
    day_of,
    parse,
    size_of,
)


def word(value: str) -> Term:
    return Term(None, value)


@pytest.mark.parametrize(
    ("query", "tree"),
    [
        ("lunch", word("lunch")),
        ("  lunch   friday ", All((word("lunch"), word("friday")))),
        ('"next friday"', Term(None, "next friday", phrase=True)),
        ('say "a \\"quoted\\" word"', All((word("say"), Term(None, 'a "quoted" word', True)))),
        ("from:ann@example.org", Term("from", "ann@example.org")),
        ('from:"Ann Lee"', Term("from", "Ann Lee", phrase=True)),
        ("FROM:ann To:bob", All((Term("from", "ann"), Term("to", "bob")))),
        ("cc:carol bcc:dave", All((Term("cc", "carol"), Term("bcc", "dave")))),
        ("subject:invoice", Term("subject", "invoice")),
        ("has:attachment", Term("has", "attachment")),
        ("has:Attachments", Term("has", "attachment")),
        ("is:UNREAD", Term("is", "unread")),
        (
            "is:read is:starred is:snoozed",
            All(tuple(Term("is", v) for v in ("read", "starred", "snoozed"))),
        ),
        ("label:Work/Projects", Term("label", "Work/Projects")),
        ('label:"Big Plans"', Term("label", "Big Plans", phrase=True)),
        ("in:Spam", Term("in", "spam")),
        ("in:anywhere", Term("in", "anywhere")),
        (
            "before:2024-03-01 after:2024/1/31",
            All((Term("before", "2024-03-01"), Term("after", "2024/1/31"))),
        ),
        ("older_than:3d newer_than:1Y", All((Term("older_than", "3d"), Term("newer_than", "1Y")))),
        ("larger:5M smaller:20k", All((Term("larger", "5M"), Term("smaller", "20k")))),
        ("-is:read", Not(Term("is", "read"))),
        ("--lunch", word("lunch")),
        ("---lunch", Not(word("lunch"))),
        ("-(a b)", Not(All((word("a"), word("b"))))),
        ("a OR b", Either((word("a"), word("b")))),
        ("a OR b c", All((Either((word("a"), word("b"))), word("c")))),
        ("a OR b OR c", Either((word("a"), word("b"), word("c")))),
        ("(a b) OR c", Either((All((word("a"), word("b"))), word("c")))),
        ("{a b} c", All((Either((word("a"), word("b"))), word("c")))),
        ("{a -b}", Either((word("a"), Not(word("b"))))),
        ("a AND b", All((word("a"), word("b")))),
        ("a or b", All((word("a"), word("or"), word("b")))),  # only upper-case OR is the operator
        ("re:lunch", word("re:lunch")),  # not an operator: a word
        ("http://example.org/x", word("http://example.org/x")),
        ("e-mail well-known", All((word("e-mail"), word("well-known")))),
        ("a - b", All((word("a"), word("b")))),  # a lone - is punctuation
        ('ab"cd"', All((word("ab"), Term(None, "cd", phrase=True)))),
        ("lunch !!!", word("lunch")),  # punctuation has no words to match
        ("(lunch)", word("lunch")),
        ("((a))", word("a")),
        ("Grüße 東京", All((word("Grüße"), word("東京")))),
    ],
)
def test_query_trees(query: str, tree: object) -> None:
    """Each query parses to its tree of terms."""
    assert parse(query) == tree


@pytest.mark.parametrize("query", ["", "   ", "!!!", "- -", '""', "()", "{}", "( ) { }", "AND"])
def test_nothing_to_search_for(query: str) -> None:
    """Empty queries and punctuation alone name nothing."""
    assert parse(query) is None


@pytest.mark.parametrize(
    ("query", "sentence"),
    [
        ('"open', 'A quote (") is not closed; add the closing one or leave the quote out.'),
        ('from:"open', 'A quote (") is not closed; add the closing one or leave the quote out.'),
        ("(a b", "A ( is not closed; add the )."),
        ("{a b", "A { is not closed; add the }."),
        ("(a}", "A ( is not closed; add the )."),
        ("a)", "There is a ) without its opening bracket."),
        ("}", "There is a } without its opening bracket."),
        ("a OR", "OR needs a term on each side, like invoice OR receipt."),
        ("OR a", "OR needs a term on each side, like invoice OR receipt."),
        ("a OR OR b", "OR needs a term on each side, like invoice OR receipt."),
        ("a AND OR b", "OR needs a term on each side, like invoice OR receipt."),
        ("(a OR) b", "OR needs a term on each side, like invoice OR receipt."),
        ("-OR a", "A - must stand right before what to leave out, like -is:read."),
        ("-)", "There is a ) without its opening bracket."),
        ("from:", "from: needs a value right after the colon, like from:ann@example.org."),
        ("from: ann", "from: needs a value right after the colon, like from:ann@example.org."),
        ('subject:""', "subject: needs a value right after the colon, like subject:something."),
        ("label:(work)", "label: needs a value right after the colon, like label:something."),
        ("is:important", "is: takes unread, read, starred or snoozed, not 'important'."),
        ("has:drive", "has: takes attachment, not 'drive'."),
        (
            "in:nowhere",
            "in: takes inbox, starred, snoozed, sent, drafts, archive, spam, trash or "
            "anywhere, not 'nowhere'.",
        ),
        (
            "before:yesterday",
            "before: takes a date like 2024-03-01 or 2024/03/01, not 'yesterday'.",
        ),
        (
            "after:2024-02-30",
            "after: takes a date like 2024-03-01 or 2024/03/01, not '2024-02-30'.",
        ),
        ("after:24-02-01", "after: takes a date like 2024-03-01 or 2024/03/01, not '24-02-01'."),
        ("older_than:3", "older_than: takes an age like 3d, 2w, 1m or 1y, not '3'."),
        ("newer_than:0d", "newer_than: takes an age like 3d, 2w, 1m or 1y, not '0d'."),
        ("newer_than:99999d", "newer_than: takes an age like 3d, 2w, 1m or 1y, not '99999d'."),
        ("larger:big", "larger: takes a size in bytes like 500, 20k or 5M, not 'big'."),
        ("smaller:5G", "smaller: takes a size in bytes like 500, 20k or 5M, not '5G'."),
        (
            "larger:9999999999M",
            "larger: takes a size in bytes like 500, 20k or 5M, not '9999999999M'.",
        ),
    ],
)
def test_mistakes_are_one_sentence(query: str, sentence: str) -> None:
    """Bad syntax says what to change, in one sentence of the mailroom error tree."""
    with pytest.raises(QueryError) as raised:
        parse(query)
    assert str(raised.value) == sentence
    assert isinstance(raised.value, MailroomError)


def test_bounds() -> None:
    """Length, term count and nesting are bounded; just inside each bound parses."""
    assert parse("a" * MAX_LENGTH) == word("a" * MAX_LENGTH)
    with pytest.raises(QueryError, match="longer than 1000 characters"):
        parse("a" * (MAX_LENGTH + 1))
    assert isinstance(parse(" ".join(["w"] * MAX_TERMS)), All)
    with pytest.raises(QueryError, match="more than 50 terms"):
        parse(" ".join(["w"] * (MAX_TERMS + 1)))
    assert parse("(" * MAX_NESTING + "a" + ")" * MAX_NESTING) == word("a")
    with pytest.raises(QueryError, match="nests brackets more than 5 deep"):
        parse("(" * (MAX_NESTING + 1) + "a" + ")" * (MAX_NESTING + 1))


@pytest.mark.parametrize(
    "query",
    [
        "-" * 999 + "a",
        "(" * 999,
        ")" * 999,
        "{" * 999,
        '"' * 999,
        "\\" * 999,
        "OR " * 300,
        "a:" * 400,
        "from:" * 200,
        "\x00\x01\x02 \u202e\ufeff",
        "<script>alert(1)</script>",
        "' OR 1=1 --",
        "%_\\%",
        "a\u00a0b\u2003c",
    ],
)
def test_hostile_input_parses_or_says_why(query: str) -> None:
    """Whatever is typed, the parser answers with a tree, None or a QueryError."""
    try:
        parse(query)
    except QueryError as error:
        assert str(error).endswith(".") and "\n" not in str(error)


def test_values() -> None:
    """Dates, ages and sizes as the filter reads them."""
    assert day_of("2024-03-01") == day_of("2024/3/1") == date(2024, 3, 1)
    assert day_of("2024-02-30") is None and day_of("2024-3") is None
    assert age_of("3D") == (3, "d") and age_of("12m") == (12, "m") and age_of("1") is None
    assert size_of("500") == 500 and size_of("20k") == 20 * 1024
    assert size_of("5MB") == 5 * 1024 * 1024 and size_of("-1") is None
