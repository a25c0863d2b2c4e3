// TorchX dashboard: refreshes server-rendered parts, follows logs. No build step, no inline script.
"use strict";
(function () {
  const period = Number(document.body.dataset.refreshMs || 2000);

  // a part whose HTML the server renders: replaced by a fresh copy every `period` ms
  function refresh(el) {
    let busy = false;
    let last = null;
    const tick = async () => {
      if (busy || el.dataset.final) return;
      busy = true;
      try {
        const resp = await fetch(el.dataset.refreshUrl, { credentials: "same-origin" });
        if (resp.ok) {
          const html = await resp.text();
          if (html !== last) el.innerHTML = html; // unchanged parts stay (and stay unannounced)
          last = html;
        }
        if (el.querySelector && el.id === "app-status") {
          const st = el.querySelector("#app-state");
          if (st && ["SUCCEEDED", "FAILED", "CANCELLED"].includes(st.textContent)) {
            el.dataset.final = "1";
            window.setTimeout(() => window.location.reload(), 200); // show the final details
          }
        }
      } catch (e) { /* the next tick retries */ }
      busy = false;
    };
    window.setInterval(tick, period);
  }
  document.querySelectorAll("[data-refresh-url]").forEach(refresh);

  // follow a log: events carry [line number, text] pairs, appended as text (never as HTML);
  // the tab keeps the last MAX_LINES lines. A reconnect resumes after the last event's id.
  const MAX_LINES = 20000;
  const log = document.getElementById("log");
  const autoscroll = document.getElementById("autoscroll");
  const numbers = document.getElementById("line-numbers");
  if (numbers && log) {
    numbers.addEventListener("change", () => log.classList.toggle("numbered", numbers.checked));
  }
  if (log && log.dataset.streamUrl) {
    const state = document.getElementById("follow-state");
    const src = new EventSource(log.dataset.streamUrl);
    const line = (n, text) => {
      const el = document.createElement("span");
      el.className = "line";
      const ln = document.createElement("span");
      ln.className = "ln";
      ln.dataset.n = String(n);
      el.appendChild(ln);
      el.appendChild(document.createTextNode(text + "\n"));
      return el;
    };
    src.onmessage = (ev) => {
      const pairs = JSON.parse(ev.data);
      if (!pairs.length) return;
      const frag = document.createDocumentFragment();
      pairs.forEach((p) => frag.appendChild(line(p[0], p[1])));
      log.appendChild(frag);
      let extra = log.childElementCount - MAX_LINES;
      while (extra-- > 0) log.removeChild(log.firstElementChild);
      if (!autoscroll || autoscroll.checked) log.scrollTop = log.scrollHeight;
      state.textContent = "Following…";
    };
    src.addEventListener("end", (ev) => {
      const err = JSON.parse(ev.data);
      state.textContent = err ? "Log ended: " + err : "Log ended (the app finished).";
      src.close();
    });
    src.onerror = () => {
      state.textContent = src.readyState === EventSource.CLOSED
        ? "Not following: the dashboard refused the stream (it may follow too many logs); reload to retry."
        : "Reconnecting… (the lines already shown are kept; it resumes after the last one)";
    };
  }
})();
