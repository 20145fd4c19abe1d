// The action forms (templates/_actions.html): the toast they answer into, "select all",
// and after an action the page the server names (HX-Trigger "mailroom:go"), drawn in place.
"use strict";
(() => {
  function toastArea() {
    let toast = document.getElementById("toast");
    if (!toast) {
      toast = document.createElement("div");
      toast.id = "toast";
      toast.className = "toast";
      toast.setAttribute("aria-live", "polite");
      document.body.appendChild(toast);
    }
    return toast;
  }
  document.addEventListener("DOMContentLoaded", toastArea);
  document.addEventListener("mailroom:go", (event) => {
    const to = event.detail && event.detail.to;
    if (typeof to !== "string" || !to.startsWith("/") || to.startsWith("//")) return;
    if (to !== location.pathname + location.search) history.pushState({}, "", to);
    window.htmx.ajax("GET", to, { target: ".shell", select: ".shell", swap: "outerHTML" });
  });
  document.addEventListener("click", (event) => {
    if (event.target.closest(".toast-close")) toastArea().replaceChildren();
  });
  document.addEventListener("change", (event) => {
    if (!event.target.matches(".select-all")) return;
    for (const box of document.querySelectorAll(".select-thread")) box.checked = event.target.checked;
  });
})();
