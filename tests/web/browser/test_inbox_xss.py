"""In the browser: classic XSS vectors in subjects, sender names, bodies and label
names execute nothing — no dialog opens and no script sets the page's flag."""

from __future__ import annotations

from email.utils import formataddr

from playwright.sync_api import Page, expect

from mailroom.labels.operations import Operations
from mailroom.labels.resolver import resolve_path
from mailroom.store.engine import Store
from tests.factories import make_message
from tests.helpers import ingest, thread_of
from tests.web.browser.conftest import Watch

RUN = "top.__xss=1;alert(1)"  # what every vector tries to run
VECTORS = [
    f"<script>{RUN}</script>",
    f"<img src=x onerror={RUN}>",
    f"<svg onload={RUN}>",
    f"<svg><script>{RUN}</script></svg>",
    f'"><script>{RUN}</script>',
    f"'><img src=x onerror={RUN}>",
    f'<iframe src="javascript:{RUN}"></iframe>',
    f'<a href="javascript:{RUN}">click me</a>',
    f"<body onload={RUN}>",
    f"<details open ontoggle={RUN}>",
    f"<input autofocus onfocus={RUN}>",
    f"<math><mtext><table><mglyph><style><img src=x onerror={RUN}>",
    f'<object data="javascript:{RUN}"></object>',
    f'<embed src="javascript:{RUN}">',
    f"<form><button formaction=javascript:{RUN}>x</button></form>",
    f'<meta http-equiv="refresh" content="0;url=javascript:{RUN}">',
    '<base href="javascript:alert(1)//">',
    f'<div hx-get="/" hx-trigger="load" hx-on::load="{RUN}">htmx</div>',
    f'<div hx-on:click="{RUN}" hx-trigger="load">htmx click</div>',
    '<img src=x onerror="&#116;&#111;&#112;.__xss=1">',
    f"<scr<script>ipt>{RUN}</script>",
    f"<svg><animate onbegin={RUN} attributeName=x dur=1s>",
    f'<noscript><p title="</noscript><img src=x onerror={RUN}>">',
    f"javascript:{RUN}",
    "{{7*7}} ${7*7} <%= 7*7 %>",
]


def _plant(store: Store, user_account: tuple[int, int, int]) -> list[int]:
    """One message per vector (subject, sender name, text and HTML body), a label named
    like a vector on the first; their thread ids."""
    ingest(
        store,
        user_account,
        [
            (
                f"xss{index}",
                make_message(
                    f"xss{index}@evil",
                    subject=vector,
                    sender=formataddr((vector, f"xss{index}@evil.example")),
                    body=f"{vector}\n",
                    html=f"<p>{vector}</p>{vector}",
                    minutes=100 + index,
                ),
            )
            for index, vector in enumerate(VECTORS)
        ],
    )
    threads = [thread_of(store, f"xss{index}@evil") for index in range(len(VECTORS))]
    with store.session() as session:
        label = resolve_path(session, user_account[0], [f"<img src=x onerror={RUN}>"])
        ops = Operations(session, user_account[0])
        ops.label(ops.messages_of_threads([threads[0]]), label.id)  # type: ignore[list-item]
    return [thread for thread in threads if thread is not None]


def test_vectors_run_no_script(
    page: Page, store: Store, mail: tuple[int, int, int], watch: Watch
) -> None:
    """The Inbox, the hostile label's page and every thread page show the vectors as
    text and run none of them."""
    threads = _plant(store, mail)
    assert len(threads) == len(VECTORS)
    page.reload()
    _nothing_ran(page, watch)
    rows = page.locator("ol.threads")
    expect(rows).to_contain_text(f"<script>{RUN}</script>")
    expect(rows).to_contain_text("{{7*7}}")
    page.get_by_role("navigation", name="Mailboxes").get_by_role(
        "link", name=f"<img src=x onerror={RUN}>"
    ).click()
    expect(page.locator("ol.threads > li")).to_have_count(1)
    for thread in threads:
        page.goto(f"/threads/{thread}", wait_until="load")
        for frame in page.frames:
            frame.wait_for_load_state("load")
        _nothing_ran(page, watch)


def _nothing_ran(page: Page, watch: Watch) -> None:
    page.wait_for_timeout(50)  # let a timer-, load- or focus-driven handler fire if one got in
    assert page.evaluate("typeof window.__xss") == "undefined", page.url
    assert watch.problems == [], page.url
