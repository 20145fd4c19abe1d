// Live updates (web/pages/live.py): the JMAP push stream (/jmap/eventsource, signed in by
// the session cookie) says when mail, threads or mailboxes changed; the sidebar's counts
// are then drawn again from /fragments/sidebar and, on a mailbox page, the list from the
// page itself — unless the reader is in the middle of something there (a ticked row, a
// field with focus, an open dialog), which is drawn at the next change instead.
//
// The reader's own requests come first. While one that replaces the list or the sidebar
// (a tab, a page, an action) is on its way, no redraw is sent; a redraw that answers after
// the reader started one is dropped. Either way the redraw is asked again, for the page
// then shown, once the reader's request has landed. Otherwise a redraw would replace the
// element the reader's answer was headed for, and the click would come to nothing.
"use strict";
(() => {
  const TYPES = ["Email", "Thread", "Mailbox"];
  const LIVE_HEADER = "X-Mailroom-Live";
  let busy = false;
  let again = false;
  const readerXhrs = new WeakSet(); // the reader's requests on their way that replace a redrawn part
  let readerRequests = 0; // how many of them
  let readerStarted = 0; // how many such requests the reader has started, ever
  let startedAt = 0; // readerStarted when the running redraw began

  function here() {
    return location.pathname + location.search;
  }

  function listing() {
    return /^\/(?:$|mail\/[a-z]+$|label\/\d+$)/.test(location.pathname);
  }

  function interrupting(main) {
    if (main.querySelector("input[type=checkbox]:checked, dialog[open]")) return true;
    const focused = document.activeElement;
    return Boolean(focused && main.contains(focused) && focused.matches("input, select, textarea"));
  }

  function live(event) {
    const config = event.detail.requestConfig;
    return Boolean(config && config.headers && config.headers[LIVE_HEADER]);
  }

  function replacesRedrawn(event) {
    const target = event.detail.target;
    if (!(target instanceof Element)) return false;
    return ["main", "sidebar"].some((id) => {
      const part = document.getElementById(id);
      return Boolean(part && (target.contains(part) || part.contains(target)));
    });
  }

  async function refresh() {
    if (busy || readerRequests > 0) {
      again = true;
      return;
    }
    busy = true;
    startedAt = readerStarted;
    const headers = { [LIVE_HEADER]: "1" };
    try {
      // Each redraw is sent from the element it replaces: sent from the same element
      // (htmx's default, the body) the second would wait in htmx's queue and be sent
      // after this refresh had already ended.
      const swaps = [];
      const sidebar = document.getElementById("sidebar");
      if (sidebar) {
        const url = "/fragments/sidebar?page=" + encodeURIComponent(here());
        swaps.push(window.htmx.ajax("GET", url, { source: sidebar, target: sidebar, swap: "outerHTML", headers }));
      }
      const main = document.getElementById("main");
      if (main && listing() && !interrupting(main)) {
        swaps.push(
          window.htmx.ajax("GET", here(), { source: main, target: main, select: "#main", swap: "outerHTML", headers }),
        );
      }
      await Promise.allSettled(swaps);
      document.body.dataset.liveRefreshed = String(Number(document.body.dataset.liveRefreshed || 0) + 1);
    } finally {
      busy = false;
      redrawIfAsked();
    }
  }

  function redrawIfAsked() {
    if (again && !busy && readerRequests === 0) {
      again = false;
      refresh();
    }
  }

  // A press counts as the reader starting something: a click is a press and a release on
  // the same element, and a redraw landing between the two replaces that element, so the
  // click reaches no link at all. A redraw that answers after a press is dropped and asked
  // again, as after the reader's own requests.
  document.addEventListener(
    "pointerdown",
    () => {
      readerStarted += 1;
    },
    true,
  );

  document.addEventListener("htmx:beforeRequest", (event) => {
    if (live(event) || !replacesRedrawn(event)) return;
    readerXhrs.add(event.detail.xhr);
    readerRequests += 1;
    readerStarted += 1;
  });

  // htmx announces the end of a request again from an attached ancestor when its source
  // was swapped out, so the request (not the event) is what is counted off.
  document.addEventListener("htmx:afterRequest", (event) => {
    if (!readerXhrs.delete(event.detail.xhr)) return;
    readerRequests = Math.max(0, readerRequests - 1);
    redrawIfAsked();
  });

  document.addEventListener("htmx:beforeSwap", (event) => {
    if (!live(event)) return;
    if (readerStarted !== startedAt || readerRequests > 0) {
      event.detail.shouldSwap = false;
      again = true;
    } else if (event.detail.target.id === "main" && interrupting(event.detail.target)) {
      event.detail.shouldSwap = false; // the reader began something while it was on its way
    }
  });

  function moved(data) {
    let change;
    try {
      change = JSON.parse(data);
    } catch {
      return false;
    }
    return Object.values((change && change.changed) || {}).some((types) =>
      TYPES.some((type) => Object.prototype.hasOwnProperty.call(types, type)),
    );
  }

  document.addEventListener("DOMContentLoaded", () => {
    if (!window.EventSource || !window.htmx || !document.getElementById("sidebar")) return;
    const stream = new EventSource("/jmap/eventsource?types=" + TYPES.join(",") + "&ping=60");
    stream.addEventListener("state", (event) => {
      if (moved(event.data)) refresh();
    });
    stream.addEventListener("open", () => {
      document.body.dataset.live = "on";
    });
    window.addEventListener("pagehide", () => stream.close());
  });
})();
