// Live updates (web/pages/live.py): the JMAP push stream (/jmap/eventsource, signed in by
// the session cookie) says when mail, threads or mailboxes changed; the sidebar's counts
// are then drawn again from /fragments/sidebar and, on a mailbox page, the list from the
// page itself — unless the reader is in the middle of something there (a ticked row, a
// field with focus), which is drawn at the next change instead.
"use strict";
(() => {
  const TYPES = ["Email", "Thread", "Mailbox"];
  let busy = false;
  let again = false;

  function here() {
    return location.pathname + location.search;
  }

  function listing() {
    return /^\/(?:$|mail\/[a-z]+$|label\/\d+$)/.test(location.pathname);
  }

  function interrupting(main) {
    if (main.querySelector("input[type=checkbox]:checked")) return true;
    const focused = document.activeElement;
    return Boolean(focused && main.contains(focused) && focused.matches("input, select, textarea"));
  }

  async function refresh() {
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    try {
      const swaps = [];
      if (document.getElementById("sidebar")) {
        const url = "/fragments/sidebar?page=" + encodeURIComponent(here());
        swaps.push(window.htmx.ajax("GET", url, { target: "#sidebar", swap: "outerHTML" }));
      }
      const main = document.getElementById("main");
      if (main && listing() && !interrupting(main)) {
        swaps.push(window.htmx.ajax("GET", here(), { target: "#main", select: "#main", swap: "outerHTML" }));
      }
      await Promise.allSettled(swaps);
      document.body.dataset.liveRefreshed = String(Number(document.body.dataset.liveRefreshed || 0) + 1);
    } finally {
      busy = false;
      if (again) {
        again = false;
        refresh();
      }
    }
  }

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
