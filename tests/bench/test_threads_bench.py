"""The threading benchmark reads the Maildir it is given and never writes into it."""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.factories import make_message
from tests.helpers import write_maildir

BENCH = Path(__file__).resolve().parents[2] / "bench" / "threads_vs_notmuch.py"


def _load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("threads_vs_notmuch", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _snapshot(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        if path.is_file()
        else "dir"
        for path in sorted(root.rglob("*"))
    }


def test_given_maildir_is_read_not_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--maildir DIR benchmarks DIR as it is: no corpus, no .Spam folder, no file added."""
    mail = write_maildir(
        tmp_path / "Mail",
        {
            "a": make_message("a@x", subject="Plans"),
            "b": make_message("b@x", subject="Re: Plans", in_reply_to="a@x"),
        },
    )
    write_maildir(mail, {"c": make_message("c@x", subject="Elsewhere")}, folder=".Work")
    before = _snapshot(mail)
    bench = _load_bench()

    def no_corpus(*args: object, **kwargs: object) -> Path:
        raise AssertionError("the benchmark wrote its corpus into the given Maildir")

    monkeypatch.setattr(bench, "ensure_corpus_maildir", no_corpus)
    if shutil.which("notmuch") is None:  # the comparison needs it; the point here is the folder
        monkeypatch.setattr(
            bench, "notmuch_partition", lambda maildir, work: (bench.notmuch_models(maildir)[0], 0)
        )
    monkeypatch.setattr(sys, "argv", ["threads_vs_notmuch.py"])
    bench.main(["--maildir", str(mail), "--orders", "1"])
    out = capsys.readouterr().out
    assert f"Maildir {mail}: 3 files" in out
    assert "1 of 1 random arrival orders gave the identical partition" in out
    assert _snapshot(mail) == before


def test_a_folder_that_is_no_maildir_is_one_sentence(tmp_path: Path) -> None:
    """--maildir on a plain folder stops with one sentence and leaves the folder empty."""
    bench = _load_bench()
    with pytest.raises(SystemExit, match="is not a Maildir"):
        bench.main(["--maildir", str(tmp_path)])
    assert list(tmp_path.iterdir()) == []
