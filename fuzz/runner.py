"""Run one harness: atheris (libFuzzer) if installed, else a random-mutation loop.

Usage: ``python -m fuzz.NAME [--seconds N] [--plain] [libFuzzer flags ...]``.

* Inputs are read from the seed corpus ``fuzz/corpus/NAME`` and new ones are
  kept in a work corpus (``$FUZZ_WORK/NAME``, default under the temp dir), so
  the repository's seeds change only when someone merges on purpose
  (``-merge=1 fuzz/corpus/NAME $FUZZ_WORK/NAME``).
* An input that breaks the contract is written to ``fuzz/crashes/NAME/``,
  where ``tests/fuzz`` replays it from then on.
"""

from __future__ import annotations

import hashlib
import os
import random
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent
Check = Callable[[bytes], None]


def corpus_dir(name: str) -> Path:
    """The seed corpus of harness ``name``."""
    return ROOT / "corpus" / name


def crash_dir(name: str) -> Path:
    """Where inputs that broke harness ``name``'s contract are kept."""
    return ROOT / "crashes" / name


def seeds(name: str) -> list[bytes]:
    """Every seed and every kept crash of harness ``name``, in a stable order."""
    folders = [folder for folder in (corpus_dir(name), crash_dir(name)) if folder.is_dir()]
    files = sorted(path for folder in folders for path in folder.iterdir())
    return [path.read_bytes() for path in files if path.is_file()]


def run(name: str, load: Callable[[], Check], modules: tuple[str, ...]) -> None:
    """Fuzz harness ``name``: ``load`` imports the code under test and returns the check."""
    args = sys.argv[1:]
    seconds = 600
    if "--seconds" in args:
        at = args.index("--seconds")
        seconds = int(args[at + 1])
        del args[at : at + 2]
    plain = "--plain" in args
    if plain:
        args.remove("--plain")
    atheris: ModuleType | None = None
    if not plain:
        try:
            import atheris as _atheris
        except ImportError:
            print("atheris is not installed; using the plain random-mutation loop.", flush=True)
        else:
            atheris = _atheris
    if atheris is None:
        _plain_loop(name, load(), seconds)
        return
    with atheris.instrument_imports(include=list(modules)):
        check = load()
    work = Path(os.environ.get("FUZZ_WORK", Path(tempfile.gettempdir()) / "mailroom-fuzz")) / name
    work.mkdir(parents=True, exist_ok=True)
    crashes = crash_dir(name)
    crashes.mkdir(parents=True, exist_ok=True)
    flags = [
        f"-max_total_time={seconds}",
        f"-artifact_prefix={crashes}/",
        "-timeout=10",
        "-rss_limit_mb=1536",
        "-print_final_stats=1",
    ]
    atheris.Setup([sys.argv[0], *flags, *args, str(work), str(corpus_dir(name))], check)
    atheris.Fuzz()


# Bytes that mean something to the parsers, inserted whole by the plain loop.
_TOKENS = [b"\r\n", b"\n\n", b"{", b"}", b"[", b"]", b'"', b"(", b")", b"\\", b"=?utf-8?b?", b"?="]
_TOKENS += [b"--", b"{5}", b"\x00", b"\x01", b"\xff", b"%"]


def _mutate(data: bytes, others: list[bytes], rng: random.Random) -> bytes:
    """One to four random edits: flip, insert, delete, duplicate, or splice another seed."""
    buffer = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        kind = rng.randrange(6)
        at = rng.randint(0, len(buffer))
        if kind == 0 and buffer:
            at = min(at, len(buffer) - 1)
            buffer[at] ^= 1 << rng.randrange(8)
        elif kind == 1:
            buffer[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif kind == 2 and buffer:
            del buffer[at : at + rng.randint(1, 16)]
        elif kind == 3 and buffer:
            piece = buffer[at : at + rng.randint(1, 64)]
            buffer[at:at] = piece * rng.randint(1, 8)
        elif kind == 4 and others:
            other = rng.choice(others)
            cut = rng.randint(0, len(other))
            buffer[at:] = other[cut:]
        else:
            buffer[at:at] = rng.choice(_TOKENS)
    return bytes(buffer)


def _plain_loop(name: str, check: Check, seconds: int) -> None:
    """Mutate seeds at random for ``seconds``; keep inputs that break the contract."""
    pool = seeds(name) or [b""]
    rng = random.Random(int(os.environ.get("FUZZ_SEED", "0")) or None)
    deadline = time.monotonic() + seconds
    runs = failures = 0
    while time.monotonic() < deadline:
        data = _mutate(rng.choice(pool), pool, rng)
        runs += 1
        try:
            check(data)
        except Exception:  # noqa: BLE001 - every exception is a finding here
            failures += 1
            crashes = crash_dir(name)
            crashes.mkdir(parents=True, exist_ok=True)
            path = crashes / f"crash-{hashlib.sha1(data).hexdigest()}"
            path.write_bytes(data)
            print(f"contract broken; input kept as {path}", flush=True)
            traceback.print_exc()
        else:
            if rng.random() < 0.01 and len(pool) < 5000:
                pool.append(data)  # keep some variety without coverage feedback
    print(f"{name}: {runs} runs in {seconds} s, {failures} inputs broke the contract", flush=True)
