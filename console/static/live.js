// fairway console: live updates. The server sends an event "change" on /events when what the
// page shows may have changed; the page then fetches its own URL's main part again and swaps
// it in. No other script runs on the console, and none is inline (the CSP forbids it).
"use strict";
(function () {
  var main = document.getElementById("main");
  var state = document.getElementById("live-state");
  if (!main || !window.EventSource) {
    if (state) state.textContent = "off";
    return;
  }
  var busy = false, again = false;
  function typing() {
    var a = document.activeElement;
    return a && main.contains(a) && (a.tagName === "INPUT" || a.tagName === "TEXTAREA");
  }
  function refresh() {
    if (busy) { again = true; return; }
    if (typing()) { setTimeout(refresh, 1000); return; }
    busy = true;
    fetch(location.href, { headers: { "X-Fairway-Fragment": "1" }, credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (r.status === 401) { location.reload(); throw new Error("signed out"); }
        if (!r.ok) throw new Error("HTTP " + r.status);
        var gen = r.headers.get("X-Fairway-Generation");
        return r.text().then(function (html) {
          var open = [];
          main.querySelectorAll("details[open][id]").forEach(function (d) { open.push(d.id); });
          main.innerHTML = html;
          open.forEach(function (id) { var d = document.getElementById(id); if (d) d.open = true; });
          main.setAttribute("data-generation", gen || "");
          main.setAttribute("data-updated", String(Date.now()));
          if (state) state.textContent = "on";
        });
      })
      .catch(function () { if (state) state.textContent = "retrying"; })
      .finally(function () {
        busy = false;
        if (again) { again = false; refresh(); }
      });
  }
  var es = new EventSource("/events");
  es.addEventListener("open", function () { if (state) state.textContent = "on"; });
  es.addEventListener("error", function () { if (state) state.textContent = "reconnecting"; });
  es.addEventListener("change", function (e) {
    if (e.data && e.data === main.getAttribute("data-generation")) return;
    refresh();
  });
})();
