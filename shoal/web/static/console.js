// Draws Vega-Lite charts from the specs the server embedded as JSON (never executed as code),
// reloads a dashboard when the workflow that feeds it has finished a new run, and shows every
// <time class="when"> in the reader's zone: "3 min ago", the exact local time on hover.
(function () {
  "use strict";
  var rel = window.Intl && Intl.RelativeTimeFormat ? new Intl.RelativeTimeFormat(undefined, { numeric: "auto" }) : null;
  var exact = new Intl.DateTimeFormat(undefined, {
    year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit",
    timeZoneName: "short"
  });
  function relative(date) {
    var s = (date.getTime() - Date.now()) / 1000, a = Math.abs(s);
    if (!rel) { return exact.format(date); }
    if (a < 45) { return rel.format(Math.round(s), "second"); }
    if (a < 2700) { return rel.format(Math.round(s / 60), "minute"); }
    if (a < 79200) { return rel.format(Math.round(s / 3600), "hour"); }
    if (a < 2592000) { return rel.format(Math.round(s / 86400), "day"); }
    return exact.format(date);
  }
  function times() {
    document.querySelectorAll("time.when[datetime]").forEach(function (el) {
      var d = new Date(el.getAttribute("datetime"));
      if (isNaN(d.getTime())) { return; }
      el.title = exact.format(d);
      el.textContent = relative(d);
    });
  }
  times();
  setInterval(times, 30000);

  document.querySelectorAll(".vega-chart[data-spec]").forEach(function (el) {
    var spec = JSON.parse(document.getElementById(el.dataset.spec).textContent);
    var options = { actions: false, renderer: "svg" };
    if (window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches) {
      // Light text and grid on the card's own dark background, not a white box.
      options.theme = "dark";
      options.config = { background: "transparent" };
    }
    window.vegaEmbed(el, spec, options).then(function () {
      el.setAttribute("data-rendered", "true");
    }).catch(function (err) {
      el.textContent = "chart failed: " + err;
      el.setAttribute("data-rendered", "error");
    });
  });
  // Copy buttons: the named element's text, exactly (a new token's secret).
  document.querySelectorAll("button[data-copy]").forEach(function (button) {
    button.addEventListener("click", function () {
      var text = document.getElementById(button.dataset.copy).textContent;
      var done = document.getElementById("copy-done");
      var said = function (what) { if (done) { done.textContent = what; } };
      if (!navigator.clipboard) { said("select the text and copy it"); return; }
      navigator.clipboard.writeText(text).then(function () { said("copied"); }, function () { said("select the text and copy it"); });
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
