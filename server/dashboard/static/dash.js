// agentspace dashboard: lease countdowns tick between updates. Everything
// else is server-rendered fragments swapped in by htmx on stream events.
(function () {
  "use strict";
  function span(ms) {
    var s = Math.floor(ms / 1000);
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m" + (s % 60) + "s";
    if (s < 172800) return Math.floor(s / 3600) + "h" + Math.floor((s % 3600) / 60) + "m";
    return Math.floor(s / 86400) + "d";
  }
  function tick() {
    var now = Date.now();
    document.querySelectorAll("time.countdown[data-expires]").forEach(function (el) {
      var t = Date.parse(el.getAttribute("data-expires"));
      if (isNaN(t)) return;
      var left = t - now;
      el.textContent = left > 0 ? span(left) + " left" : "expired";
      el.classList.toggle("expired", left <= 0);
    });
  }
  setInterval(tick, 1000);
  document.addEventListener("DOMContentLoaded", tick);
})();
