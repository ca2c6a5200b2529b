// Draws Vega-Lite charts from the specs the server embedded as JSON (never executed as code),
// and reloads a dashboard when the workflow that feeds it has finished a new run.
(function () {
  "use strict";
  document.querySelectorAll(".vega-chart[data-spec]").forEach(function (el) {
    var spec = JSON.parse(document.getElementById(el.dataset.spec).textContent);
    window.vegaEmbed(el, spec, { actions: false, renderer: "svg" }).then(function () {
      el.setAttribute("data-rendered", "true");
    }).catch(function (err) {
      el.textContent = "chart failed: " + err;
      el.setAttribute("data-rendered", "error");
    });
  });
  var board = document.getElementById("dashboard");
  if (board && board.dataset.versionUrl) {
    setInterval(function () {
      fetch(board.dataset.versionUrl, { credentials: "same-origin" }).then(function (r) {
        return r.ok ? r.json() : null;
      }).then(function (v) {
        if (v && v.version !== board.dataset.version) { window.location.reload(); }
      }).catch(function () {});
    }, 3000);
  }
})();
