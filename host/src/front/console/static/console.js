// skillhost console: keeps the approval queue and the badge live. Pages
// work without it (every action is a plain form). Nothing here inserts a
// string as HTML: the queue is our own server-rendered, escaped fragment,
// parsed inertly (DOMParser runs no script) and moved in as nodes.
"use strict";
(function () {
  const badge = document.getElementById("pending-badge");
  if (!badge || !window.EventSource) return;
  const queue = document.getElementById("queue");
  let fetching = false;
  let again = false;

  async function refreshQueue() {
    if (!queue) return;
    if (fetching) { again = true; return; }
    fetching = true;
    try {
      const resp = await fetch(queue.dataset.live, {
        credentials: "same-origin",
        headers: { "Accept": "text/html" },
      });
      if (resp.status === 401) { window.location.assign("/sign-in"); return; }
      if (!resp.ok) return;
      const doc = new DOMParser().parseFromString(await resp.text(), "text/html");
      // Keep what the operator typed (a reason) and where the focus was.
      const typed = new Map();
      for (const input of queue.querySelectorAll("input[type=text]")) {
        if (input.value) typed.set(input.id, input.value);
      }
      const focused = queue.contains(document.activeElement) ? document.activeElement.id : "";
      queue.replaceChildren(...Array.from(doc.body.childNodes, (n) => document.importNode(n, true)));
      for (const [id, value] of typed) {
        const input = document.getElementById(id);
        if (input) input.value = value;
      }
      if (focused) document.getElementById(focused)?.focus();
    } finally {
      fetching = false;
      if (again) { again = false; refreshQueue(); }
    }
  }

  const live = new EventSource("/live");
  live.addEventListener("approvals", (e) => {
    const n = Number.parseInt(e.data, 10);
    if (Number.isFinite(n)) {
      badge.textContent = String(n);
      badge.setAttribute("aria-label", n + " waiting");
    }
    refreshQueue();
  });
})();
