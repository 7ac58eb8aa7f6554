// Cortex dashboard: live updates over server-sent events. Pages work without this script;
// with it, a page marked data-live re-renders its main content when the store changes.
(function () {
  "use strict";
  var body = document.body;
  var source = body.getAttribute("data-live");
  var status = document.getElementById("live-status");
  if (!source || !window.EventSource) { return; }

  function editing() {
    var el = document.activeElement;
    return el && el.closest && el.closest("main form") && /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName);
  }

  var pending = false;
  function refresh() {
    if (editing()) { pending = true; return; }
    pending = false;
    fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html === null) { return; }
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("main");
        var main = document.getElementById("main");
        if (fresh && main) {
          main.replaceWith(document.adoptNode(fresh));
          body.setAttribute("data-updated", String(Date.now()));
        }
      })
      .catch(function () { /* the next change event retries */ });
  }

  document.addEventListener("focusout", function () {
    if (pending) { setTimeout(function () { if (pending) { refresh(); } }, 200); }
  });

  var events = new EventSource(source);
  events.addEventListener("open", function () {
    if (status) { status.textContent = "live"; status.className = "live on"; }
    body.setAttribute("data-live-ready", "1");
  });
  events.addEventListener("error", function () {
    if (status) { status.textContent = "reconnecting"; status.className = "live off"; }
  });
  events.addEventListener("change", refresh);
})();
