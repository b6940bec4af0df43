// Moments on the page (<time datetime=... data-local>) in the reader's own time zone, zone named.
// Without JavaScript the server's text stays: the same moment in the page's zone, also named.
(function () {
  "use strict";
  var pad = function (n) { return String(n).padStart(2, "0"); };
  document.querySelectorAll("time[data-local]").forEach(function (node) {
    var at = new Date(node.getAttribute("datetime"));
    if (isNaN(at.getTime())) { return; }
    var zone = new Intl.DateTimeFormat(undefined, { timeZoneName: "short" })
      .formatToParts(at).filter(function (p) { return p.type === "timeZoneName"; })
      .map(function (p) { return p.value; }).join("");
    node.title = node.textContent;  // the server's text, in the page's zone
    node.textContent = at.getFullYear() + "-" + pad(at.getMonth() + 1) + "-" + pad(at.getDate()) + " " +
      pad(at.getHours()) + ":" + pad(at.getMinutes()) + " " + zone;
  });
})();
