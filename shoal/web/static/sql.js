// The SQL page: the CodeMirror editor over the form's textarea (Ctrl+Enter runs), the schema
// tree and completion from the schema in the page (only what the viewer may read), Cancel while a
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

  // ---- tabs: several statements, each with its own text and last result ----
  // Kept in this browser's localStorage, per user. A tab's result is the id of the history
  // entry its last run kept: switching to the tab opens that entry (/sql?q=ID), which reads the
  // kept result and never runs the statement again.
  var tabs = (function () {
    var bar = document.getElementById("sql-tabs");
    var key = "shoal.sql.tabs:" + (form.dataset.user || "");
    var state;
    try { state = JSON.parse(window.localStorage.getItem(key) || "null"); } catch (e) { state = null; }
    if (!state || !Array.isArray(state.tabs) || !state.tabs.length) {
      state = { tabs: [], active: null, next: 1 };
    }
    function store() {
      try { window.localStorage.setItem(key, JSON.stringify(state)); } catch (e) { /* private mode: tabs last this page */ }
    }
    function find(id) { return state.tabs.filter(function (t) { return t.id === id; })[0]; }
    function create(name, text, result) {
      var tab = { id: "t" + Date.now().toString(36) + Math.random().toString(36).slice(2, 6),
        name: name || "Query " + state.next, text: text || "", result: result || null };
      state.next += 1;
      state.tabs.push(tab);
      return tab;
    }
    function current() { return find(state.active); }
    var leaving = false;  // set once this page is being left for another tab's
    function keepText() {
      if (leaving) { return; }
      var tab = current();
      if (tab) { tab.text = editor.view.state.doc.toString(); }
      store();
    }
    function show(tab) {  // open a tab: its last result if it has one, else its text alone
      keepText();
      leaving = true;
      state.active = tab.id;
      store();
      window.location.assign(tab.result ? "/sql?q=" + encodeURIComponent(tab.result) : "/sql");
    }

    // Which tab this page belongs to.
    var shown = form.dataset.queryId;
    var pageText = editor.view.state.doc.toString();
    var ran = window.sessionStorage.getItem("shoal.sql.ran");
    window.sessionStorage.removeItem("shoal.sql.ran");
    var owner = shown ? state.tabs.filter(function (t) { return t.result === shown; })[0] : null;
    var tab;
    if (owner) {                           // a tab's own result (a switch, paging, a reload)
      tab = owner;
    } else if (shown && ran && find(ran)) { // the result of a run from a tab
      tab = find(ran);
      tab.result = shown;
      tab.text = pageText;
    } else if (shown || pageText) {        // a history entry, a saved query, "query this table"
      // Into the active tab when it holds this text already (a save) or nothing; else a new tab.
      tab = current();
      if (tab && (tab.text === pageText || (!tab.text.trim() && !tab.result))) {
        tab.text = pageText;
        if (shown) { tab.result = shown; }
        if (form.dataset.title) { tab.name = form.dataset.title; }
      } else {
        tab = create(form.dataset.title || (shown ? "Result" : ""), pageText, shown || null);
      }
    } else {                               // plain /sql: the active tab, as it was left
      tab = current() || state.tabs[0] || create();
      var asked = new URLSearchParams(window.location.search).get("q");
      if (tab.result && asked === tab.result) {
        tab.result = null;                 // its entry is gone from the history
      } else if (tab.result && !window.location.search) {
        state.active = tab.id;             // show its kept result (the entry, not a new run)
        store();
        leaving = true;
        window.location.replace("/sql?q=" + encodeURIComponent(tab.result));
      }
    }
    state.active = tab.id;
    if (tab.text !== pageText) { editor.setValue(tab.text); }
    store();

    function render() {
      bar.textContent = "";
      state.tabs.forEach(function (t) {
        var el = document.createElement("div");
        el.className = "sql-tab" + (t.id === state.active ? " active" : "");
        el.setAttribute("role", "tab");
        el.setAttribute("aria-selected", t.id === state.active ? "true" : "false");
        el.dataset.tab = t.id;
        var name = document.createElement("button");
        name.type = "button";
        name.className = "tab-name";
        name.textContent = t.name;
        name.title = t.result ? "open this tab and its last result" : "open this tab";
        name.addEventListener("click", function () { if (t.id !== state.active) { show(t); } });
        name.addEventListener("dblclick", function () { rename(t); });
        var ren = document.createElement("button");
        ren.type = "button";
        ren.className = "tab-rename";
        ren.title = "rename this tab";
        ren.setAttribute("aria-label", "rename " + t.name);
        ren.textContent = "✎";
        ren.addEventListener("click", function () { rename(t); });
        var close = document.createElement("button");
        close.type = "button";
        close.className = "tab-close";
        close.title = "close this tab";
        close.setAttribute("aria-label", "close " + t.name);
        close.textContent = "×";
        close.addEventListener("click", function () { closeTab(t); });
        el.appendChild(name);
        el.appendChild(ren);
        el.appendChild(close);
        bar.appendChild(el);
      });
      var add = document.createElement("button");
      add.type = "button";
      add.id = "tab-new";
      add.title = "new tab";
      add.setAttribute("aria-label", "new tab");
      add.textContent = "+";
      add.addEventListener("click", function () { keepText(); show(create()); });
      bar.appendChild(add);
      bar.hidden = false;
    }
    function rename(t) {
      var name = window.prompt("Tab name", t.name);
      if (name === null) { return; }
      t.name = name.trim().slice(0, 60) || t.name;
      store();
      render();
    }
    function closeTab(t) {
      var i = state.tabs.indexOf(t);
      keepText();
      state.tabs.splice(i, 1);
      if (!state.tabs.length) { create(); }
      if (t.id === state.active) {
        show(state.tabs[Math.min(i, state.tabs.length - 1)]);
      } else {
        store();
        render();
      }
    }
    render();
    // The text is kept as it is typed (the editor mirrors it into the textarea), and on leaving.
    var last = textarea.value;
    setInterval(function () { if (textarea.value !== last) { last = textarea.value; keepText(); } }, 700);
    window.addEventListener("pagehide", keepText);
    return {
      ran: function () { keepText(); window.sessionStorage.setItem("shoal.sql.ran", state.active); }
    };
  })();

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
  // The page carries the schema (its view is audited once, with it); the fetch is a fallback.
  var inPage = document.getElementById("schema-data");
  (inPage ? Promise.resolve(JSON.parse(inPage.textContent)) : fetch(tree.dataset.url, { credentials: "same-origin" }).then(function (r) {
    if (!r.ok) { throw new Error(r.status); }
    return r.json();
  })).then(build).catch(function (err) {
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
    tabs.ran();
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

  // ---- an error's spot: the cursor on the token the message names (the page marks it too) ----
  var spot = document.getElementById("sql-error-spot");
  if (spot && editor.view.state.doc.toString() === textarea.defaultValue) {  // the text the error is about
    var doc = editor.view.state.doc;
    var lineNo = parseInt(spot.dataset.line, 10);
    if (lineNo >= 1 && lineNo <= doc.lines) {
      var at = Math.min(doc.line(lineNo).from + parseInt(spot.dataset.column, 10) - 1, doc.line(lineNo).to);
      var token = document.getElementById("sql-error-token").textContent.length;
      editor.view.dispatch({ selection: { anchor: at, head: Math.min(at + token, doc.line(lineNo).to) }, scrollIntoView: true });
    }
  }

  // ---- saving: the editor's text, not the page's ----
  var save = document.getElementById("save-form");
  if (save) {
    save.addEventListener("submit", function () {
      save.querySelector("input[name=sql]").value = editor.view.state.doc.toString();
    });
  }
})();
