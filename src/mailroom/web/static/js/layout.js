// The frame's few behaviours: mark that script runs (for the phone-width CSS)
// and open or close the sidebar with the Menu button.
"use strict";
document.documentElement.classList.add("js");
document.addEventListener("DOMContentLoaded", () => {
  const button = document.querySelector(".menu-button");
  const sidebar = document.getElementById("sidebar");
  if (!button || !sidebar) return;
  button.addEventListener("click", () => {
    const open = sidebar.classList.toggle("open");
    button.setAttribute("aria-expanded", String(open));
  });
});
