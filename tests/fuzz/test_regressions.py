"""The fuzz seeds and every input that once broke a contract, replayed without atheris."""

from __future__ import annotations

from pathlib import Path

import pytest

from fuzz import fetch, jmap_request, mime, runner

HARNESSES = {"mime": mime.load, "fetch": fetch.load, "jmap_request": jmap_request.load}


def _inputs(name: str) -> list[Path]:
    return sorted(
        p
        for d in (runner.corpus_dir(name), runner.crash_dir(name))
        if d.is_dir()
        for p in d.iterdir()
    )


@pytest.mark.parametrize("name", sorted(HARNESSES))
def test_every_kept_input_meets_the_contract(name: str) -> None:
    """Each seed and each kept crash of the harness passes its contract check."""
    check = HARNESSES[name]()
    inputs = _inputs(name)
    assert inputs, f"fuzz/corpus/{name} has no seeds"
    for path in inputs:
        check(path.read_bytes())


def test_the_fetch_findings_are_kept() -> None:
    """The FETCH reader's fuzzing findings stay in the regression set (the fix is pinned)."""
    kept = {path.name for path in runner.crash_dir("fetch").iterdir()}
    assert {"offset-of-99-hours", "quoted-escapes", "numeric-internaldate-fallback"} <= kept


def test_the_plain_loop_keeps_an_input_that_breaks_a_contract(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without atheris the random-mutation loop runs and writes a breaking input to crashes/."""
    monkeypatch.setattr(runner, "ROOT", tmp_path)
    (tmp_path / "corpus" / "demo").mkdir(parents=True)
    (tmp_path / "corpus" / "demo" / "seed").write_bytes(b"abc")

    def check(data: bytes) -> None:
        if data != b"abc":
            raise ValueError("changed")

    runner._plain_loop("demo", check, seconds=1)
    assert list((tmp_path / "crashes" / "demo").iterdir())
