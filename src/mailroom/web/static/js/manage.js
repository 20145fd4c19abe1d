// Accounts, settings and admin pages: ask before a form marked .confirm is sent
// (without script the form is sent as it is; the server needs no confirmation).
document.addEventListener("submit", (event) => {
  const form = event.target;
  if (form instanceof HTMLFormElement && form.classList.contains("confirm")) {
    if (!window.confirm(form.dataset.confirm || "Are you sure?")) event.preventDefault();
  }
});
