// The identity-wait pages' optional helper. The page works without it: its
// "Check again" link reloads it. With it, the page checks again by itself,
// politely: first after the page's own interval (data-every), then backing
// off to once a minute, never while the tab is hidden, and not at all after
// 15 minutes. A check fetches this same page, so it learns nothing the page
// would not show and is bound to this browser just as the page is. When the
// page has moved on (another heading), the live region says so and the
// browser goes there.
(function () {
  "use strict";
  var link = document.getElementById("check-again");
  var news = document.getElementById("wait-news");
  var heading = document.querySelector("h1");
  var auto = document.getElementById("wait-auto");
  if (!link || !news || !heading || !auto || !window.fetch || !window.DOMParser) {
    return;
  }
  var every = Math.max(5, Number(link.getAttribute("data-every")) || 5);
  var maxEvery = 60;
  var stopAt = Date.now() + 15 * 60 * 1000;
  var timer = null;
  var busy = false;
  var done = false;

  function later() {
    if (done) {
      return;
    }
    if (Date.now() + every * 1000 > stopAt) {
      done = true;
      news.textContent = "This page has stopped checking by itself. Select Check again to see where things stand.";
      return;
    }
    timer = setTimeout(check, every * 1000);
    every = Math.min(maxEvery, Math.round(every * 1.5));
  }

  function moveOn(title) {
    done = true;
    news.textContent = "Update: " + title + ". Opening that page now.";
    setTimeout(function () {
      window.location.replace(link.href);
    }, 1500);
  }

  function check() {
    timer = null;
    if (done || busy || document.hidden) {
      return; // a hidden tab checks again when it is shown
    }
    busy = true;
    fetch(link.href, { credentials: "same-origin", cache: "no-store", headers: { Accept: "text/html" } })
      .then(function (resp) {
        // A fault of ours (5xx) may pass: keep waiting.
        return resp.status >= 500 ? null : resp.text();
      })
      .then(function (text) {
        busy = false;
        var next = text === null ? null : new DOMParser().parseFromString(text, "text/html").querySelector("h1");
        if (next && next.textContent.trim() !== heading.textContent.trim()) {
          moveOn(next.textContent.trim());
          return;
        }
        later();
      })
      .catch(function () {
        busy = false;
        later();
      });
  }

  document.addEventListener("visibilitychange", function () {
    if (!document.hidden && timer === null) {
      check();
    }
  });
  auto.hidden = false;
  later();
})();
