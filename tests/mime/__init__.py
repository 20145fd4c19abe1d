"""Tests for mailroom.mime: parsing raw messages, charsets, headers, sanitizing, previews."""
