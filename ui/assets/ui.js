// berth web UI: enhancements only. Every page works without this script.
"use strict";
(function () {
  // Search as you type: fetch the results of the search page for the
  // form's values and put them in place of the current ones.
  function liveSearch() {
    var form = document.getElementById("search-form");
    var results = document.getElementById("results");
    if (!form || !results || !window.fetch || !window.DOMParser) { return; }
    var timer = null, seq = 0;
    function run() {
      var params = new URLSearchParams(new FormData(form));
      Array.from(params.keys()).forEach(function (k) { if (!params.get(k)) { params.delete(k); } });
      var qs = params.toString();
      var url = form.getAttribute("action") + (qs ? "?" + qs : "");
      var mine = ++seq;
      fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" } }).then(function (resp) {
        return resp.text().then(function (text) { return { ok: resp.ok, text: text }; });
      }).then(function (r) {
        if (mine !== seq) { return; }
        var doc = new DOMParser().parseFromString(r.text, "text/html");
        var fresh = doc.getElementById("results");
        if (fresh) {
          results.replaceWith(document.importNode(fresh, true));
          results = document.getElementById("results");
          history.replaceState(null, "", url);
        }
      }).catch(function () {});
    }
    form.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(run, 200);
    });
  }

  // Graph: hovering or focusing a version highlights its edges.
  function graphHighlight() {
    document.querySelectorAll("svg.upgrade-graph").forEach(function (svg) {
      function mark(version, on) {
        svg.querySelectorAll("path.edge").forEach(function (e) {
          if (e.getAttribute("data-from") === version || e.getAttribute("data-to") === version) {
            e.classList.toggle("hl", on);
          }
        });
      }
      svg.querySelectorAll("g.node").forEach(function (g) {
        var v = g.getAttribute("data-version");
        g.addEventListener("mouseenter", function () { g.classList.add("hl"); mark(v, true); });
        g.addEventListener("mouseleave", function () { g.classList.remove("hl"); mark(v, false); });
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    liveSearch();
    graphHighlight();
  });
})();
