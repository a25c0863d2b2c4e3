// TorchX dashboard: refreshes server-rendered parts, follows logs. No build step, no inline script.
"use strict";
(function () {
  const period = Number(document.body.dataset.refreshMs || 2000);

  // a part whose HTML the server renders: replaced by a fresh copy every `period` ms
  function refresh(el) {
    let busy = false;
    const tick = async () => {
      if (busy || el.dataset.final) return;
      busy = true;
      try {
        const resp = await fetch(el.dataset.refreshUrl, { credentials: "same-origin" });
        if (resp.ok) el.innerHTML = await resp.text();
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

  // follow a log: lines arrive as JSON arrays of strings, appended as text (never as HTML)
  const log = document.getElementById("log");
  if (log && log.dataset.streamUrl) {
    const state = document.getElementById("follow-state");
    const src = new EventSource(log.dataset.streamUrl);
    let atBottom = true;
    log.addEventListener("scroll", () => {
      atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
    });
    src.onmessage = (ev) => {
      const lines = JSON.parse(ev.data);
      log.appendChild(document.createTextNode(lines.join("\n") + "\n"));
      if (atBottom) log.scrollTop = log.scrollHeight;
    };
    src.addEventListener("end", (ev) => {
      const err = JSON.parse(ev.data);
      state.textContent = err ? "Log ended: " + err : "Log ended (the app finished).";
      src.close();
    });
    src.onerror = () => { if (src.readyState === EventSource.CLOSED) state.textContent = "Disconnected."; };
  }
})();
