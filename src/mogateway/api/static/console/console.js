/* mogateway console: progressive enhancement only; every page works without this file.
 * - [data-live] on <body>: a Server-Sent Events stream whose events carry {fragments: {id: html}};
 *   each fragment replaces the inner HTML of the element with that id (HTML rendered by the gateway).
 * - form[data-inline="id"]: sent with fetch; the HTML fragment answered goes into element "id".
 * - form[data-confirm]: asks before sending.  button[data-copy="id"]: copies that input's value.
 */
(function () {
  "use strict";

  function live(url) {
    var source = new EventSource(url);
    source.onmessage = function (event) {
      var fragments = JSON.parse(event.data).fragments || {};
      Object.keys(fragments).forEach(function (id) {
        var target = document.getElementById(id);
        if (target) { target.innerHTML = fragments[id]; }
      });
    };
    source.onerror = function () {
      // A closed stream (401: signed out or expired) does not reconnect: reload, which signs in again.
      if (source.readyState === EventSource.CLOSED) { setTimeout(function () { location.reload(); }, 3000); }
    };
  }

  function inline(form) {
    var target = document.getElementById(form.getAttribute("data-inline"));
    var button = form.querySelector("button[type=submit]");
    if (button) { button.disabled = true; }
    if (target) { target.textContent = "Sending…"; }
    fetch(form.action, {
      method: "POST",
      body: new URLSearchParams(new FormData(form)),
      headers: { "x-console-fetch": "1" },
      credentials: "same-origin",
    }).then(function (response) {
      return response.text();
    }).then(function (text) {
      if (target) { target.innerHTML = text; }
    }).catch(function () {
      if (target) { target.textContent = "The gateway could not be reached."; }
    }).finally(function () {
      if (button) { button.disabled = false; }
    });
  }

  function copy(button) {
    var field = document.getElementById(button.getAttribute("data-copy"));
    if (!field) { return; }
    var done = function () { button.textContent = "Copied"; };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(field.value).then(done, function () { field.select(); });
    } else {
      field.select();
      if (document.execCommand("copy")) { done(); }
    }
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    var question = form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) { event.preventDefault(); return; }
    if (form.hasAttribute("data-inline")) { event.preventDefault(); inline(form); }
  });
  document.addEventListener("click", function (event) {
    var button = event.target.closest("button[data-copy]");
    if (button) { copy(button); }
  });
  var url = document.body.getAttribute("data-live");
  if (url && window.EventSource) { live(url); }
})();
