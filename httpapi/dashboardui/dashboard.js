// The dashboard works without this script. With it: a Copy button beside a
// secret, and a running recovery's page refreshes itself.
(function () {
  "use strict";
  document.querySelectorAll("button[data-copy]").forEach(function (b) {
    var field = document.getElementById(b.getAttribute("data-copy"));
    var status = b.parentNode.querySelector(".copied");
    if (!field || !navigator.clipboard) {
      return;
    }
    b.hidden = false;
    b.addEventListener("click", function () {
      navigator.clipboard.writeText(field.value).then(function () {
        if (status) { status.textContent = "Copied"; }
      }, function () {
        field.select();
        if (status) { status.textContent = "Select the secret and copy it"; }
      });
    });
  });
  var refresh = document.querySelector("[data-refresh]");
  if (refresh) {
    var secs = parseInt(refresh.getAttribute("data-refresh"), 10) || 2;
    setTimeout(function () { window.location.reload(); }, secs * 1000);
  }
})();
