"""The offline assistant's accuracy on the labelled development set (issue 18, item 3).

    python bench/assistant_accuracy.py [--manifest bench/devset/manifest.tsv] [--folds 5]
    (or: python bench/tabs_accuracy.py --model offline)

The messages go through the real ingest path into a fresh store exactly as
in ``tabs_accuracy.py``; then the offline adapter's own pieces —
``assistant.mail.load_mail`` (the stored facts), ``OfflineClassifier.features``
(MiniLM embedding plus header signs) and ``assistant.linear.train`` — are
scored two ways:

1. **Corrections**: k-fold cross-validation on the human labels, as if the
   owner had corrected the other folds' mail (each message is predicted by a
   model that never saw it).
2. **Cascade only**: trained on the mail the cascade sorted confidently (the
   stages ``OfflineClassifier`` learns from), no human label at all, and
   scored on every message — a new owner's first model.

Prints the same tables as ``tabs_accuracy.py`` and the time per message.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from sqlalchemy import select
from tabs_accuracy import ROOT, Labelled, ingest, read_manifest, report

from mailroom.assistant.linear import train
from mailroom.assistant.mail import load_mail
from mailroom.assistant.offline import CONFIDENT_STAGES, OfflineClassifier
from mailroom.store.models import Message


def score_offline(items: list[Labelled], folds: int = 5) -> int:
    """Score the offline model both ways; print Markdown tables."""
    classifier = OfflineClassifier()
    with tempfile.TemporaryDirectory(prefix="assistant-accuracy-") as workdir:
        store, _user = ingest(items, Path(workdir))
        with store.session() as session:
            rows = session.execute(
                select(Message.id, Message.provider_id, Message.category, Message.category_stage)
            ).all()
            mails = load_mail(session, [row.id for row in rows])
        store.dispose()
    by_path = {row.provider_id: row for row in rows}
    ordered = sorted(items, key=lambda item: item.path)
    started = time.perf_counter()
    features = classifier.features([mails[by_path[item.path].id] for item in ordered])
    embed_ms = (time.perf_counter() - started) * 1000 / len(ordered)
    labels = [item.tab for item in ordered]

    predicted: dict[str, tuple[str, str]] = {}
    train_ms: list[float] = []
    for fold in range(folds):
        test = [i for i in range(len(ordered)) if i % folds == fold]
        learn = [i for i in range(len(ordered)) if i % folds != fold]
        started = time.perf_counter()
        model = train(features[learn], [labels[i] for i in learn])
        train_ms.append((time.perf_counter() - started) * 1000)
        for i, (tab, p) in zip(test, model.predict(features[test]), strict=True):
            predicted[ordered[i].path] = (tab, f"{tab} ({p:.0%}, fold {fold})")
    report(items, predicted, f"Offline model, {folds}-fold cross-validation on the human labels")

    confident = [
        i for i, item in enumerate(ordered) if by_path[item.path].category_stage in CONFIDENT_STAGES
    ]
    cascade_labels = [by_path[ordered[i].path].category for i in confident]
    model = train(features[confident], cascade_labels)
    cascade_only = {
        item.path: (tab, f"{tab} ({p:.0%})")
        for item, (tab, p) in zip(ordered, model.predict(features), strict=True)
    }
    report(
        items,
        cascade_only,
        f"Offline model trained on the cascade's confident tabs only ({len(confident)} messages)",
    )
    print(
        f"\nEmbedding: {embed_ms:.1f} ms per message (batch of {len(ordered)}); "
        f"training on {len(ordered) * (folds - 1) // folds} messages: "
        f"median {float(np.median(train_ms)):.0f} ms"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    """Score the offline assistant on the development set."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifest", type=Path, default=ROOT / "bench/devset/manifest.tsv")
    parser.add_argument("--folds", type=int, default=5)
    args = parser.parse_args(argv)
    return score_offline(read_manifest(args.manifest), args.folds)


if __name__ == "__main__":
    sys.exit(main())
