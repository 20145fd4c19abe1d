// Keyboard shortcuts in the Gmail convention; "?" shows the list (templates/_keys_help.html).
// Actions press the matching button of the page's action form (data-key), so a shortcut
// does exactly what the button does; in a list they act on the checked rows, or on the
// row under the cursor when none is checked.
"use strict";
(() => {
  let cursor = -1;
  let awaitingG = false;

  const rows = () => Array.from(document.querySelectorAll("li.thread"));
  const actionForm = () => document.getElementById("actions") || document.getElementById("bulk");

  function typing(element) {
    if (!element) return false;
    if (element.isContentEditable) return true;
    if (element.tagName === "INPUT") return !["checkbox", "radio", "button", "submit"].includes(element.type);
    return element.tagName === "TEXTAREA" || element.tagName === "SELECT";
  }

  function currentRow() {
    const focused = document.activeElement && document.activeElement.closest("li.thread");
    return focused || rows()[cursor] || null;
  }

  function moveCursor(step) {
    const all = rows();
    if (!all.length) return;
    const at = all.indexOf(currentRow());
    cursor = Math.max(0, Math.min(all.length - 1, (at < 0 ? -1 : at) + step));
    all.forEach((row, index) => row.classList.toggle("cursor", index === cursor));
    const link = all[cursor].querySelector("a.thread-link");
    if (link) link.focus();
  }

  function press(key) {
    const form = actionForm();
    if (!form) return;
    let buttons = Array.from(form.querySelectorAll(`button[data-key="${CSS.escape(key)}"]`));
    if (form.id === "bulk") {
      const row = currentRow();
      if (!document.querySelector(".select-thread:checked")) {
        const box = row && row.querySelector(".select-thread");
        if (!box) return;
        box.checked = true;
      }
      if (key === "s" && buttons.length > 1) {
        const starred = row ? row.querySelector(".star.on") !== null : false;
        buttons = buttons.filter((b) => b.value === (starred ? "unstar" : "star"));
      }
    }
    if (buttons.length) buttons[0].click();
  }

  function openLabels() {
    const menu = document.querySelector(".label-menu");
    if (!menu) return;
    menu.open = true;
    const select = menu.querySelector("select");
    if (select) select.focus();
  }

  // r / a / f: answer the newest open message of a thread (its Reply, Reply all, Forward link).
  function answer(key) {
    const links = document.querySelectorAll(`details[open] .message-answers a[data-key="${key}"]`);
    if (links.length) links[links.length - 1].click();
  }

  // In a list j/k move the cursor; in a conversation they open the older / newer one.
  function step(by, link) {
    const neighbour = rows().length ? null : document.querySelector(link);
    if (neighbour) neighbour.click(); else moveCursor(by);
  }

  const simple = {
    j: () => step(1, "a.older-thread"),
    k: () => step(-1, "a.newer-thread"),
    o: () => { const row = currentRow(); const link = row && row.querySelector("a.thread-link"); if (link) link.click(); },
    u: () => { const back = document.querySelector(".back-link"); if (back) back.click(); },
    x: () => { const row = currentRow(); const box = row && row.querySelector(".select-thread"); if (box) box.click(); },
    l: openLabels,
    z: () => { const undo = document.querySelector("#toast button.undo"); if (undo) undo.click(); },
    c: () => location.assign("/compose"),
    r: () => answer("r"),
    a: () => answer("a"),
    f: () => answer("f"),
    "/": () => { const search = document.getElementById("search-q"); if (search) search.focus(); },
    "?": () => { const help = document.getElementById("keys-help"); if (help && !help.open) help.showModal(); },
  };
  const pressed = new Set(["e", "#", "!", "s", "I", "U"]);
  const go = { i: "/", s: "/mail/starred" };

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || event.defaultPrevented) return;
    if (typing(event.target) || document.querySelector("dialog[open]")) return;
    const key = event.key;
    if (awaitingG) {
      awaitingG = false;
      if (go[key]) { event.preventDefault(); location.assign(go[key]); }
      return;
    }
    if (key === "g") { awaitingG = true; return; }
    if (simple[key]) { event.preventDefault(); simple[key](); return; }
    if (pressed.has(key)) { event.preventDefault(); press(key); }
  });
  document.addEventListener("htmx:afterSwap", () => { cursor = -1; });
})();
