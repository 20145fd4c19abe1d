"""The read commands' tables (cli/table.py): fitted to the width, nothing cut off, aligned."""

from __future__ import annotations

from mailroom.cli.table import Column, cell_width, render, wrap


def test_a_table_that_fits_is_drawn_whole_in_rich_s_box() -> None:
    """Columns as wide as their widest cell, the header in the heavy box, rows below."""
    lines = render([Column("id"), Column("subject")], [("7", "Hello")], 80)
    assert lines == [
        "┏━━━━┳━━━━━━━━━┓",
        "┃ id ┃ subject ┃",
        "┡━━━━╇━━━━━━━━━┩",
        "│ 7  │ Hello   │",
        "└────┴─────────┘",
    ]


def test_a_wide_table_narrows_its_widest_column_and_wraps_it_at_spaces() -> None:
    """Too wide for the terminal: the widest column wraps, every word stays, width is kept."""
    subject = "Quicker and easier shopping with Tesco this week"
    lines = render([Column("id"), Column("subject"), Column("tab")], [("1", subject, "x")], 30)
    assert max(cell_width(line) for line in lines) == 30
    cells = [line.split("│")[2].strip() for line in lines[3:-1]]
    assert " ".join(cells) == subject and len(cells) > 1


def test_a_word_longer_than_its_column_is_folded_not_cut() -> None:
    """A long address keeps every character, over two lines."""
    assert wrap("abcdefghij", 4) == ["abcd", "efgh", "ij"]
    assert wrap("see O'Reilly.&.Associates@example.org", 20) == [
        "see",
        "O'Reilly.&.Associate",
        "s@example.org",
    ]


def test_wide_characters_and_control_characters_keep_the_columns_aligned() -> None:
    """A CJK subject takes two cells per character; a tab or newline in a cell is a space."""
    lines = render(
        [Column("subject"), Column("n")], [("会議のお知らせ", "1"), ("a\tb\nc", "2")], 80
    )
    assert cell_width("会議のお知らせ") == 14
    assert len({cell_width(line) for line in lines}) == 1  # every line equally wide
    assert "│ a b c " in lines[4]


def test_a_column_with_a_maximum_wraps_within_it() -> None:
    """The reason column of `outbound failed` wraps at its maximum even when there is room."""
    lines = render([Column("reason", max_width=10)], [("550 mailbox unavailable here",)], 200)
    assert [line[2:12].rstrip() for line in lines[3:-1]] == [
        "550",
        "mailbox",
        "unavailabl",
        "e here",
    ]
