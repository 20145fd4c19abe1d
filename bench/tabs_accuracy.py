"""Tab accuracy: sort the labelled development set through the real ingest path and score it.

    python bench/tabs_accuracy.py [--manifest bench/devset/manifest.tsv] [--split all|tune|heldout]
                                  [--model cascade|offline]

Every message of the manifest is stored, as one owner's new inbox mail, into
a fresh migrated SQLite store with ``mailroom.ingest.store_batch`` — the
pipeline a sync runs, so the tab is the one the ``categorize`` stage writes.
Then the stored tab is compared with the human label: accuracy, per-tab
precision and recall, the confusion matrix (rows: label, columns: mailroom),
and every misfiled message with ``explain``'s sentence.

The owner is new (nothing sent yet, so no correspondents) and has no Gmail
labels: the score is the rule cascade's alone.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import select

from mailroom.categories.recompute import explain
from mailroom.categories.tabs import CATEGORIES
from mailroom.ingest import IncomingMessage, store_batch
from mailroom.labels.resolver import ensure_system_labels
from mailroom.owners import get_or_create_account, get_or_create_user
from mailroom.store.engine import Store, open_store
from mailroom.store.models import Message

ROOT = Path(__file__).resolve().parent.parent
OWNER = "sam.brenner@example.org"


@dataclass(frozen=True, slots=True)
class Labelled:
    """One line of the manifest: a message file, its human tab, its split and why."""

    path: str
    tab: str
    split: str
    reason: str


def read_manifest(path: Path) -> list[Labelled]:
    """The manifest's labelled messages (tab-separated; ``#`` lines are comments)."""
    found = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            file, tab, split, reason = line.split("\t")
            if tab not in CATEGORIES:
                raise SystemExit(f"{file}: {tab!r} is not a tab ({', '.join(CATEGORIES)})")
            found.append(Labelled(file, tab, split, reason))
    return found


def ingest(items: list[Labelled], workdir: Path) -> tuple[Store, int]:
    """A fresh store holding the messages as one owner's new inbox mail; (store, user id)."""
    store = open_store(f"sqlite:///{workdir / 'tabs.db'}", workdir)
    with store.session() as session:
        user = get_or_create_user(session, "sam")
        account = get_or_create_account(session, user, "main", "local", {"email": OWNER})
        inbox = ensure_system_labels(session, user.id)["inbox"]
        batch = [
            IncomingMessage(item.path, (ROOT / item.path).read_bytes(), label_ids=[inbox])
            for item in items
        ]
        store_batch(session, account.id, user.id, batch)
        user_id = user.id
    return store, user_id


def sort_through_pipeline(items: list[Labelled], workdir: Path) -> dict[str, tuple[str, str]]:
    """Ingest the messages into a fresh store: path → (stored tab, explain's sentence).

    Exits with an error when ``explain``, recomputing from stored data, does not
    come to the tab the ingest stage stored: the two must never disagree.
    """
    store, user_id = ingest(items, workdir)
    result: dict[str, tuple[str, str]] = {}
    with store.session() as session:
        rows = session.execute(select(Message.id, Message.provider_id, Message.category)).all()
        for message_id, provider_id, category in rows:
            explained = explain(session, user_id, message_id)
            if explained.decision.category != category:
                raise SystemExit(f"{provider_id}: stored {category}, but {explained.lines()[0]}")
            result[provider_id] = (category or "", explained.lines()[0])
    store.dispose()
    return result


def report(items: list[Labelled], sorted_: dict[str, tuple[str, str]], title: str) -> float:
    """Print accuracy, per-tab precision/recall, the confusion matrix and the misfiled."""
    pairs = [(item.tab, sorted_[item.path][0]) for item in items]
    right = sum(1 for label, got in pairs if label == got)
    accuracy = right / len(pairs) if pairs else 0.0
    print(f"\n## {title}: {right}/{len(pairs)} = {accuracy:.1%}\n")
    confusion = Counter(pairs)
    print("| tab | labelled | precision | recall |")
    print("|---|---:|---:|---:|")
    for tab in CATEGORIES:
        labelled = sum(1 for label, _ in pairs if label == tab)
        chosen = sum(1 for _, got in pairs if got == tab)
        hits = confusion[(tab, tab)]
        precision = f"{hits / chosen:.0%}" if chosen else "–"
        recall = f"{hits / labelled:.0%}" if labelled else "–"
        print(f"| {tab} | {labelled} | {precision} | {recall} |")
    print("\nConfusion (rows: human label, columns: mailroom's tab)\n")
    print("| label \\ tab | " + " | ".join(CATEGORIES) + " |")
    print("|---|" + "---:|" * len(CATEGORIES))
    for label in CATEGORIES:
        cells = " | ".join(str(confusion[(label, got)]) for got in CATEGORIES)
        print(f"| {label} | {cells} |")
    misfiled = [item for item in items if sorted_[item.path][0] != item.tab]
    if misfiled:
        print("\nMisfiled:\n")
    for item in misfiled:
        got, why = sorted_[item.path]
        print(f"- `{Path(item.path).name}` — labelled {item.tab} ({item.reason}); got {why}")
    return accuracy


def main(argv: list[str] | None = None) -> int:
    """Score the cascade on the development set; print the tables in Markdown."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifest", type=Path, default=ROOT / "bench/devset/manifest.tsv")
    parser.add_argument("--split", choices=("all", "tune", "heldout"), default="all")
    parser.add_argument(
        "--model",
        choices=("cascade", "offline"),
        default="cascade",
        help="score the rule cascade, or the offline assistant (bench/assistant_accuracy.py)",
    )
    args = parser.parse_args(argv)
    items = read_manifest(args.manifest)
    if args.model == "offline":
        from assistant_accuracy import score_offline

        return score_offline(items)
    with tempfile.TemporaryDirectory(prefix="tabs-accuracy-") as workdir:
        sorted_ = sort_through_pipeline(items, Path(workdir))
    splits = ("tune", "heldout") if args.split == "all" else (args.split,)
    if args.split == "all":
        report(items, sorted_, "All messages")
    for split in splits:
        report([item for item in items if item.split == split], sorted_, f"Split {split}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
