// The live view: adds each new incident of the tenant at the top of the
// table as the server sends it (server-sent events). Without this script
// the page still lists the newest incidents; reloading shows new ones.
(function () {
  "use strict";
  var status = document.getElementById("live-status");
  var rows = document.getElementById("incident-rows");
  if (!status || !rows || !window.EventSource) return;
  var src = new EventSource(status.getAttribute("data-events"));
  src.addEventListener("ready", function () {
    document.body.setAttribute("data-live", "on");
    status.textContent = "Connected: new incidents appear at the top as they are recorded.";
  });
  src.addEventListener("incident", function (e) {
    var tpl = document.createElement("template");
    tpl.innerHTML = e.data.trim();
    var tr = tpl.content.firstElementChild;
    if (!tr || document.getElementById(tr.id)) return;
    tr.classList.add("new");
    rows.insertBefore(tr, rows.firstChild);
    var empty = document.querySelector("p.empty");
    if (empty) empty.remove();
  });
  src.onerror = function () {
    document.body.setAttribute("data-live", "off");
    status.textContent = "Disconnected; retrying…";
  };
})();
