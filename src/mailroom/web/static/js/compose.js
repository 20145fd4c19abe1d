// The compose page: attach files as soon as they are chosen, and never let a
// draft save (htmx, as the user types) run beside Send, Attach or Remove — a
// full submit waits for a save in flight (whose answer brings the new draft
// id) and stops any save still to come.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("compose");
  if (!form) return;
  const autosave = form.querySelector(".autosave");
  const upload = document.getElementById("compose-upload");
  const attach = form.querySelector(".attach-button");
  let saving = false;
  let leaving = false;
  let waiting = null; // the submit button of a submit that waits for a save

  if (attach) attach.hidden = true;
  if (upload && attach) {
    upload.addEventListener("change", () => {
      if (upload.files && upload.files.length) form.requestSubmit(attach);
    });
  }
  if (autosave) {
    autosave.addEventListener("htmx:confirm", (event) => {
      if (leaving) event.preventDefault();
    });
    autosave.addEventListener("htmx:beforeRequest", () => { saving = true; });
    autosave.addEventListener("htmx:afterRequest", () => {
      saving = false;
      if (waiting) {
        const button = waiting;
        waiting = null;
        form.requestSubmit(button);
      }
    });
  }
  form.addEventListener("submit", (event) => {
    leaving = true;
    if (saving) {
      event.preventDefault();
      waiting = event.submitter || null;
      if (!waiting) waiting = form.querySelector("button[value=save]");
    }
  });
});
