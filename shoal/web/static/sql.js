// The SQL page: the CodeMirror editor over the form's textarea (Ctrl+Enter runs), the schema
// tree and completion from /sql/schema.json (only what the viewer may read), Cancel while a
// statement runs, and the save form posting the editor's text. Names from the catalog are
// inserted with textContent only, never as HTML.
(function () {
  "use strict";
  var form = document.getElementById("sql-form");
  var textarea = document.getElementById("sql-text");
  if (!form || !textarea || !window.ShoalSqlEditor) { return; }
  var editor = window.ShoalSqlEditor.sqlEditor(textarea, {
    onRun: function () { form.requestSubmit ? form.requestSubmit() : form.submit(); }
  });
  window.shoalSqlEditor = editor;
  editor.view.focus();

  function quote(name) { return /^[A-Za-z_][A-Za-z0-9_]*$/.test(name) ? name : "`" + name.replace(/`/g, "``") + "`"; }

  // ---- schema tree and completion ----
  var tree = document.getElementById("schema-tree");
  var filter = document.getElementById("schema-filter");
  function build(schema) {
    tree.textContent = "";
    tree.classList.remove("muted");
    var completion = {};
    Object.keys(schema).sort().forEach(function (db) {
      completion[db] = {};
      var dbNode = document.createElement("details");
      dbNode.className = "db";
      dbNode.open = true;
      var dbTitle = document.createElement("summary");
      dbTitle.textContent = db;
      dbNode.appendChild(dbTitle);
      Object.keys(schema[db]).sort().forEach(function (table) {
        var columns = schema[db][table];
        completion[db][table] = columns.map(function (c) { return { label: c.name, type: "property", detail: c.type }; });
        var t = document.createElement("details");
        t.className = "table";
        t.dataset.table = db + "." + table;
        var s = document.createElement("summary");
        s.textContent = table;
        var use = document.createElement("button");
        use.type = "button";
        use.className = "link insert";
        use.title = "insert a SELECT of this table";
        use.textContent = "SELECT";
        use.addEventListener("click", function (ev) {
          ev.preventDefault();
          editor.setValue("SELECT *\nFROM " + quote(db) + "." + quote(table) + "\nLIMIT 100");
          editor.view.focus();
        });
        s.appendChild(document.createTextNode(" "));
        s.appendChild(use);
        t.appendChild(s);
        var ul = document.createElement("ul");
        columns.forEach(function (c) {
          var li = document.createElement("li");
          var b = document.createElement("button");
          b.type = "button";
          b.className = "link";
          b.textContent = c.name;
          b.title = "insert " + c.name;
          b.addEventListener("click", function () { editor.insert(quote(c.name)); });
          var type = document.createElement("span");
          type.className = "muted";
          type.textContent = " " + c.type;
          li.appendChild(b);
          li.appendChild(type);
          ul.appendChild(li);
        });
        t.appendChild(ul);
        dbNode.appendChild(t);
      });
      tree.appendChild(dbNode);
    });
    if (!tree.childNodes.length) { tree.textContent = "no tables you may read"; tree.classList.add("muted"); }
    tree.dataset.loaded = "true";
    editor.setSchema(completion);
  }
  fetch(tree.dataset.url, { credentials: "same-origin" }).then(function (r) {
    if (!r.ok) { throw new Error(r.status); }
    return r.json();
  }).then(build).catch(function (err) {
    tree.textContent = "the table list could not be loaded (" + err.message + ")";
    tree.dataset.loaded = "error";
  });
  if (filter) {
    filter.addEventListener("input", function () {
      var q = filter.value.toLowerCase();
      tree.querySelectorAll("details.table").forEach(function (t) {
        t.hidden = q !== "" && t.dataset.table.toLowerCase().indexOf(q) < 0;
      });
    });
  }

  // ---- running: the elapsed time, and Cancel ----
  var cancel = document.getElementById("cancel");
  var running = document.getElementById("running");
  var elapsed = document.getElementById("elapsed");
  // The statement is posted from here, so the page (and Cancel) stays usable while it runs;
  // the answer names the page of the kept result. Without this script the form posts as usual.
  form.addEventListener("submit", function (ev) {
    ev.preventDefault();
    textarea.value = editor.view.state.doc.toString();
    if (!textarea.value.trim()) { return; }
    var started = Date.now();
    document.getElementById("run").disabled = true;
    cancel.hidden = false;
    running.hidden = false;
    var tick = setInterval(function () { elapsed.textContent = ((Date.now() - started) / 1000).toFixed(0) + " s"; }, 500);
    fetch(form.action, {
      method: "POST", body: new URLSearchParams(new FormData(form)), credentials: "same-origin",
      headers: { Accept: "application/json" }
    }).then(function (r) {
      return r.ok ? r.json() : Promise.reject(new Error("the console answered " + r.status + "; reload the page"));
    }).then(function (answer) {
      window.location.assign(answer.location);
    }).catch(function (err) {
      clearInterval(tick);
      running.hidden = false;
      running.textContent = err.message;
      running.className = "error";
      cancel.hidden = true;
      document.getElementById("run").disabled = false;
    });
  });
  cancel.addEventListener("click", function () {
    var body = new URLSearchParams();
    body.set("csrf", form.querySelector("input[name=csrf]").value);
    body.set("run", form.querySelector("input[name=run]").value);
    cancel.disabled = true;
    cancel.textContent = "Cancelling…";
    // A 404 means the statement has not reached the server yet: ask again for a few seconds.
    var tries = 0;
    (function ask() {
      fetch(form.dataset.cancelUrl, { method: "POST", body: body, credentials: "same-origin" }).then(function (r) {
        if (r.status === 404 && ++tries < 20) { setTimeout(ask, 500); }
      }).catch(function () {});
    })();
  });

  // ---- saving: the editor's text, not the page's ----
  var save = document.getElementById("save-form");
  if (save) {
    save.addEventListener("submit", function () {
      save.querySelector("input[name=sql]").value = editor.view.state.doc.toString();
    });
  }
})();
