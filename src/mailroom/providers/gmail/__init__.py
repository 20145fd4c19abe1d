"""Gmail over the Gmail API: client, quota pacer, backfill state and skipped ledger."""
