"""`mailroom outbound failed|retry|stats`: the operator sees, retries and counts sent mail."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from mailroom.cli.main import cli
from mailroom.jobs.queues import make_queues
from mailroom.outbound.sender import Sender
from mailroom.store.engine import Store
from tests.outbound.core_support import Clock, account_for, queue, sending_settings, submission
from tests.support.smtp_sink import SmtpSink


def invoke(store: Store, *args: str) -> Result:
    """Run the CLI in-process against the test store, the sink allowed as a private host."""
    url = store.engine.url.render_as_string(hide_password=False)
    return CliRunner().invoke(
        cli,
        ["--data-dir", str(store.data_dir), "--database-url", url, *args],
        env={"MAILROOM_ALLOWED_PRIVATE_HOSTS": "127.0.0.1"},
        catch_exceptions=False,
    )


def _failed_and_sent(store: Store, tmp_path: Path, sink: SmtpSink) -> tuple[int, int]:
    """One direct mail refused with 550 and one calm mail sent; their submission ids."""
    clock = Clock()
    settings = sending_settings(tmp_path)
    account_id = account_for(store, sink)
    refused = queue(store, settings, account_id, 1, clock, lane="direct")
    sent = queue(store, settings, account_id, 2, clock)
    sink.script(["550 5.1.1 no such mailbox"])
    sender = Sender(store, settings, clock=clock)
    sender.run_lane("direct")
    sender.run_lane("calm")
    sender.close()
    return refused, sent


def test_failed_lists_the_mail_that_gave_up(store: Store, tmp_path: Path) -> None:
    """The failed list shows id, lane, recipient, code and reason, as a table or JSON lines."""
    assert "No failed sends." in invoke(store, "outbound", "failed").output
    with SmtpSink() as sink:
        refused, _sent = _failed_and_sent(store, tmp_path, sink)
    table = invoke(store, "outbound", "failed")
    assert table.exit_code == 0
    assert str(refused) in table.output and "direct" in table.output
    assert "bob@example.net" in table.output and "550" in table.output
    [line] = invoke(store, "outbound", "failed", "--json").output.splitlines()
    entry = json.loads(line)
    assert (entry["id"], entry["lane"], entry["code"], entry["attempts"]) == (
        refused,
        "direct",
        550,
        0,
    )
    assert entry["recipients"] == ["bob@example.net"] and "no such mailbox" in entry["reason"]
    assert entry["messageId"] == "1@core.test" and entry["account"] == "test"


def test_retry_queues_it_again_and_wakes_its_lane(store: Store, tmp_path: Path) -> None:
    """retry takes the mail off the failed list, enqueues its lane's job, and it is then sent."""
    with SmtpSink() as sink:
        refused, _sent = _failed_and_sent(store, tmp_path, sink)
        done = invoke(store, "outbound", "retry", str(refused))
        assert done.exit_code == 0, done.output
        assert done.output.strip() == f"Submission {refused} is queued again in the direct lane."
        assert invoke(store, "outbound", "failed", "--json").output == ""
        direct = make_queues(sending_settings(tmp_path))["send_direct"]
        assert direct.pending_count() == 1
        Sender(store, sending_settings(tmp_path)).run_lane("direct")
        assert submission(store, refused).state == "sent"
        assert len(sink.messages) == 2


def test_retry_of_an_unknown_id_is_one_sentence(store: Store, tmp_path: Path) -> None:
    """Retrying what is not on the failed list exits 1 with one plain sentence."""
    with SmtpSink() as sink:
        _refused, sent = _failed_and_sent(store, tmp_path, sink)
    for wrong in (str(sent), "999"):
        result = invoke(store, "outbound", "retry", wrong)
        assert result.exit_code == 1
        assert result.output.strip() == (
            f"mailroom: There is no failed submission {wrong}; "
            "`mailroom outbound failed` lists them."
        )


def test_stats_count_per_lane(store: Store, tmp_path: Path) -> None:
    """stats counts queued, deferred, sending, sent and failed mail of each lane."""
    with SmtpSink() as sink:
        _failed_and_sent(store, tmp_path, sink)
        clock = Clock()
        settings = sending_settings(tmp_path)
        account_id = account_for(store, sink)
        queue(store, settings, account_id, 3, clock)
        deferred = queue(store, settings, account_id, 4, clock, lane="urgent")
        sink.script(["451 4.3.0 later"])
        Sender(store, settings, clock=clock).run_lane("urgent")
    assert submission(store, deferred).deferrals == 1
    stats = json.loads(invoke(store, "outbound", "stats", "--json").output)
    assert stats == {
        "urgent": {"queued": 1, "deferred": 1, "sending": 0, "sent": 0, "failed": 0},
        "calm": {"queued": 1, "deferred": 0, "sending": 0, "sent": 1, "failed": 0},
        "direct": {"queued": 0, "deferred": 0, "sending": 0, "sent": 0, "failed": 1},
    }
    table = invoke(store, "outbound", "stats").output
    assert "lane" in table and "deferred" in table and "urgent" in table
