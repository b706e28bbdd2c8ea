// skillhost console. The session's cookie alone opens nothing (a page of
// another local app, on another port of this host, receives it too):
// every page, the queue and the live stream are fetched with the session's
// CSRF token in a header, and every form carries it, from this origin's
// storage, where the sign-in's answer put it. Nothing here inserts a
// string as HTML: pages and the queue are our own server-rendered,
// escaped documents, parsed inertly (DOMParser runs no script) and moved
// in as nodes.
"use strict";
(function () {
  const KEY = "skillhost-console-csrf";
  const HEADER = "X-Skillhost-Csrf";

  function stored() {
    try { return localStorage.getItem(KEY) || ""; } catch (_) { return ""; }
  }
  function forget() {
    try { localStorage.removeItem(KEY); } catch (_) { /* nothing kept */ }
  }
  function signIn() {
    forget();
    window.location.assign("/sign-in");
  }
  function ready() {
    document.documentElement.dataset.console = "ready";
  }
  function withKey(url, accept) {
    return fetch(url, {
      credentials: "same-origin",
      cache: "no-store",
      headers: { [HEADER]: stored(), "Accept": accept },
    });
  }

  // The sign-in's answer: keep the token, go on.
  const handed = document.getElementById("console-key");
  if (handed) {
    try { localStorage.setItem(KEY, handed.dataset.csrf || ""); } catch (_) { /* shown below */ }
    handed.remove();
    if (stored()) {
      window.location.replace("/approvals");
    } else {
      document.querySelector("main").textContent =
        "This browser keeps no storage for this site, which the console needs: allow it and sign in again.";
    }
    return;
  }

  // A form posting to the console gets the token when submitted, as its
  // first field (so an upload's bundle is read only once it is checked).
  // Never a GET form: the token stays out of URLs.
  document.addEventListener("submit", (e) => {
    const form = e.target;
    if (!(form instanceof HTMLFormElement) || form.method !== "post") return;
    const action = new URL(form.action, window.location.href);
    if (action.origin !== window.location.origin || action.pathname === "/sign-in") return;
    const token = stored();
    if (!token) {
      e.preventDefault();
      signIn();
      return;
    }
    let field = form.querySelector("input[name=csrf]");
    if (!field) {
      field = document.createElement("input");
      field.type = "hidden";
      field.name = "csrf";
    }
    field.value = token;
    form.prepend(field);
    if (action.pathname === "/sign-out") forget();
  }, true);

  // A navigation got the empty shell: fetch the page with the token.
  async function showPage() {
    if (!stored()) { signIn(); return; }
    let resp;
    try {
      resp = await withKey(window.location.href, "text/html");
    } catch (_) {
      document.getElementById("loading").textContent = "The console could not be reached: reload the page.";
      return;
    }
    if (resp.status === 401 || resp.status === 403) { signIn(); return; }
    if (resp.redirected) {
      const to = new URL(resp.url);
      history.replaceState(null, "", to.pathname + to.search + window.location.hash);
    }
    const doc = new DOMParser().parseFromString(await resp.text(), "text/html");
    if (doc.getElementById("console-shell")) {
      document.getElementById("loading").textContent = "The page could not be opened: sign in again.";
      return;
    }
    document.title = doc.title;
    document.body.replaceChildren(...Array.from(doc.body.childNodes, (n) => document.importNode(n, true)));
    start();
  }

  // The approval queue and the badge, kept live.
  function start() {
    const badge = document.getElementById("pending-badge");
    if (badge) live(badge, document.getElementById("queue"));
    ready();
  }

  function live(badge, queue) {
    let fetching = false;
    let again = false;

    async function refreshQueue() {
      if (!queue) return;
      if (fetching) { again = true; return; }
      fetching = true;
      try {
        const resp = await withKey(queue.dataset.live, "text/html");
        if (resp.status === 401 || resp.status === 403) { signIn(); return; }
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
      } catch (_) {
        // The next change fetches it again.
      } finally {
        fetching = false;
        if (again) { again = false; refreshQueue(); }
      }
    }

    function onEvent(event, data) {
      if (event !== "approvals") return;
      const n = Number.parseInt(data, 10);
      if (Number.isFinite(n)) {
        badge.textContent = String(n);
        badge.setAttribute("aria-label", n + " waiting");
        // A badge shows only while something waits.
        badge.hidden = n === 0;
      }
      refreshQueue();
    }

    // The stream's server-sent events, read from a fetch (an EventSource
    // cannot send the token); it ends with the session.
    async function read(body) {
      const reader = body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) return;
          buffer += value;
          let end;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            const frame = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            let event = "message";
            const data = [];
            for (const line of frame.split("\n")) {
              if (line.startsWith("event:")) event = line.slice(6).trim();
              else if (line.startsWith("data:")) data.push(line.slice(5).trim());
            }
            onEvent(event, data.join("\n"));
          }
        }
      } catch (_) {
        // The stream broke: connect again.
      }
    }

    (async function connect() {
      let wait = 1000;
      for (;;) {
        let resp = null;
        try { resp = await withKey("/live", "text/event-stream"); } catch (_) { resp = null; }
        if (resp && (resp.status === 401 || resp.status === 403)) { signIn(); return; }
        if (resp && resp.ok && resp.body) {
          wait = 1000;
          await read(resp.body);
        }
        await new Promise((r) => setTimeout(r, wait));
        wait = Math.min(wait * 2, 30000);
      }
    })();
  }

  if (document.getElementById("console-shell")) showPage(); else start();
})();
