// The chart builder: choosing a saved query or another field redraws the preview (the form is a
// plain GET, so it works without this script too).
(function () {
  "use strict";
  var form = document.getElementById("builder-form");
  if (!form) { return; }
  form.querySelectorAll("select").forEach(function (s) {
    s.addEventListener("change", function () { form.requestSubmit ? form.requestSubmit() : form.submit(); });
  });
})();
