// The execution page: the graph drawn inline (so its states can be clicked) instead of as an
// image; clicking a state opens its steps (input, output, error) below and scrolls to them.
// The SVG is Graphviz's output, with every name in it escaped; it is parsed as XML and only
// its nodes are adopted (DOMParser never runs scripts), and the image stays as the fallback.
(function () {
  "use strict";
  var figure = document.getElementById("graph-figure");
  var img = document.getElementById("execution-graph");
  if (!figure || !img) { return; }
  function open(node) {
    var found = Array.prototype.filter.call(document.querySelectorAll("#steps details.step"), function (d) {
      return d.dataset.node === node;
    });
    found.forEach(function (d) { d.open = true; });
    if (found.length) { found[0].scrollIntoView({ block: "start" }); }
    return found.length;
  }
  fetch(img.getAttribute("src"), { credentials: "same-origin" }).then(function (r) {
    return r.ok ? r.text() : Promise.reject(new Error(r.status));
  }).then(function (text) {
    var doc = new DOMParser().parseFromString(text, "image/svg+xml");
    var svg = doc.documentElement;
    if (!svg || svg.nodeName !== "svg") { return; }
    svg = document.importNode(svg, true);
    svg.setAttribute("id", "execution-graph-svg");
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", img.getAttribute("alt") || "graph");
    svg.removeAttribute("width");
    svg.removeAttribute("height");
    svg.querySelectorAll("g.node").forEach(function (g) {
      var title = g.querySelector("title");
      var node = title ? title.textContent : "";
      if (!node || node.indexOf("__") === 0) { return; }  // start, end and the legend
      g.classList.add("clickable");
      g.setAttribute("tabindex", "0");
      g.setAttribute("data-node", node);
      g.addEventListener("click", function () { open(node); });
      g.addEventListener("keydown", function (ev) { if (ev.key === "Enter") { open(node); } });
    });
    img.hidden = true;
    figure.insertBefore(svg, img);
    figure.dataset.interactive = "true";
  }).catch(function () { figure.dataset.interactive = "error"; });
})();
