// Size each message frame to its document. The frame is sandboxed without allow-scripts
// (nothing in a mail runs) but same-origin, so this page may read its height; a
// ResizeObserver follows late images and a narrower window (see web/pages/thread.py).
"use strict";
(() => {
  function fit(frame) {
    let doc = null;
    try { doc = frame.contentDocument; } catch (error) { return; }
    if (!doc || !doc.documentElement || !doc.body) return;
    const height = Math.max(doc.documentElement.scrollHeight, doc.body.scrollHeight);
    frame.style.height = `${height + 2}px`;
  }

  function watch(frame) {
    const ready = () => {
      fit(frame);
      const doc = frame.contentDocument;
      if (doc && doc.body && !frame.observer) {
        frame.observer = new ResizeObserver(() => fit(frame));
        frame.observer.observe(doc.body);
      }
    };
    frame.addEventListener("load", () => { frame.observer = null; ready(); });
    if (frame.contentDocument && frame.contentDocument.readyState === "complete"
        && frame.contentDocument.URL !== "about:blank") ready();
  }

  document.addEventListener("DOMContentLoaded", () => {
    document.querySelectorAll("iframe.message-frame").forEach(watch);
  });
  document.addEventListener("toggle", (event) => {
    const frame = event.target.querySelector && event.target.querySelector("iframe.message-frame");
    if (frame && event.target.open) fit(frame);
  }, true);
  window.addEventListener("resize", () => document.querySelectorAll("iframe.message-frame").forEach(fit));
})();
