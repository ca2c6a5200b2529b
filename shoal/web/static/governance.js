// Governance pages: confirm before deleting, and the grant form's column and mask pickers, which
// fill the form's plain text fields (the form works the same without this script).
(function () {
  "use strict";
  document.querySelectorAll("form.confirm[data-confirm]").forEach(function (form) {
    form.addEventListener("submit", function (ev) {
      if (!window.confirm(form.dataset.confirm)) { ev.preventDefault(); }
    });
  });

  var form = document.getElementById("grant-form");
  var box = document.getElementById("picker-columns");
  if (!form || !box) { return; }
  var picker = document.getElementById("grant-picker");
  var masks = box.dataset.masks ? box.dataset.masks.split(",") : [];
  var shown = "";

  function sync() {
    var cols = [], masked = [];
    box.querySelectorAll("[data-column]").forEach(function (row) {
      var name = row.dataset.column;
      if (row.querySelector("input.pick-col").checked) { cols.push(name); }
      var how = row.querySelector("select.pick-mask").value;
      if (how) { masked.push(name + "=" + how); }
    });
    form.elements.columns.value = cols.join(", ");
    form.elements.masks.value = masked.join(", ");
  }

  function row(name) {
    var div = document.createElement("div");
    div.className = "pick";
    div.dataset.column = name;
    var label = document.createElement("label");
    var check = document.createElement("input");
    check.type = "checkbox";
    check.className = "pick-col";
    check.value = name;
    label.appendChild(check);
    label.appendChild(document.createTextNode(" " + name));
    var select = document.createElement("select");
    select.className = "pick-mask";
    select.setAttribute("aria-label", "mask for " + name);
    [""].concat(masks).forEach(function (m) {
      var opt = document.createElement("option");
      opt.value = m;
      opt.textContent = m || "no mask";
      select.appendChild(opt);
    });
    check.addEventListener("change", sync);
    select.addEventListener("change", sync);
    div.appendChild(label);
    div.appendChild(select);
    return div;
  }

  function load() {
    var table = form.elements.target.value.trim();
    if (form.elements.kind.value !== "TABLE" || !/^[^.\s]+\.[^.\s]+$/.test(table)) {
      picker.hidden = true;
      shown = "";
      return;
    }
    if (table === shown) { return; }
    fetch("/governance/columns.json?table=" + encodeURIComponent(table), { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (data) {
        if (!data || form.elements.target.value.trim() !== table) { return; }
        shown = table;
        box.replaceChildren.apply(box, data.columns.map(row));
        document.getElementById("picker-table").textContent = table;
        picker.hidden = false;
        picker.setAttribute("data-loaded", table);
      }).catch(function () {});
  }
  form.elements.target.addEventListener("change", load);
  form.elements.target.addEventListener("input", load);
  form.elements.kind.addEventListener("change", load);
})();
