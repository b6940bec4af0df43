// Times in the viewer's time zone: every <time data-local> element (see dashboard/templatetags/glance.py)
// is rewritten from its UTC datetime; the UTC text stays in its title, shown on hover.
(function () {
  "use strict";
  var format = new Intl.DateTimeFormat(undefined, {
    year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit",
    timeZoneName: "short"
  });

  function localize(root) {
    (root || document).querySelectorAll("time[data-local]").forEach(function (el) {
      var when = new Date(el.getAttribute("datetime"));
      if (!isNaN(when)) { el.textContent = format.format(when); }
    });
  }

  // "in 11 h 56 min", as dashboard/templatetags/glance.py writes it, for tables built in the browser.
  function inDuration(seconds) {
    var left = Math.max(0, Math.ceil(seconds)), parts = [];
    if (left <= 0) { return "now"; }
    [["d", 86400], ["h", 3600], ["min", 60], ["s", 1]].forEach(function (u) {
      if (parts.length < 2 && (left >= u[1] || (u[0] === "s" && !parts.length))) {
        parts.push(Math.floor(left / u[1]) + " " + u[0]);
        left %= u[1];
      }
    });
    return "in " + parts.join(" ");
  }

  window.glance = { localize: localize, inDuration: inDuration, format: format };
  document.addEventListener("DOMContentLoaded", function () { localize(document); });
})();
