// Renders the API reference from the service's own OpenAPI document with
// the Redoc bundle served beside this file. Redoc's style elements carry
// the nonce the page's policy names. Search is off: it runs in a worker
// made from a blob, which the policy does not allow.
var reference = document.getElementById("reference");

// Redoc jumps from an operation's title (h2) to its parameters (h5); a
// screen reader's outline should not. Each heading deeper than one below
// the heading before it is announced one below it instead (aria-level),
// every time Redoc draws.
function levelHeadings() {
  var previous = 0;
  reference.querySelectorAll("h1, h2, h3, h4, h5, h6").forEach(function (h) {
    var level = Number(h.tagName.charAt(1));
    if (level > previous + 1) {
      level = previous + 1;
      h.setAttribute("aria-level", String(level));
    } else {
      h.removeAttribute("aria-level");
    }
    previous = level;
  });
}

var pending = false;
new MutationObserver(function () {
  if (!pending) {
    pending = true;
    requestAnimationFrame(function () { pending = false; levelHeadings(); });
  }
}).observe(reference, {childList: true, subtree: true});

Redoc.init("/openapi.json", {
  nonce: reference.dataset.nonce,
  disableSearch: true,
  theme: {colors: {primary: {main: "#1d4ed8"}}}
}, reference);
