/* mogateway portal: a progress bar for CSV exports (Reports page). Without this script the export
 * forms download the file directly. With it, the export is read as a stream: rows are counted against
 * /portal/reports/count and the bar moves; the file is saved when the stream ends. */
(function () {
  "use strict";
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.hasAttribute || !form.hasAttribute("data-export") || !window.ReadableStream) return;
    event.preventDefault();
    var query = new URLSearchParams(new FormData(form)).toString();
    var box = document.getElementById("export-progress");
    var bar = document.getElementById("export-bar");
    var status = document.getElementById("export-status");
    box.hidden = false;
    bar.value = 0;
    status.textContent = "Counting messages…";
    var total = 0;
    fetch("/portal/reports/count?" + query, { credentials: "same-origin" })
      .then(function (r) { return r.json(); })
      .then(function (count) {
        total = count.rows || 0;
        bar.max = Math.max(total, 1);
        return fetch(form.action + "?" + query, { credentials: "same-origin" });
      })
      .then(function (response) {
        if (!response.ok) throw new Error("the export failed (" + response.status + ")");
        var name = (response.headers.get("content-disposition") || "").replace(/.*filename="([^"]+)".*/, "$1");
        var reader = response.body.getReader();
        var parts = [];
        var rows = -1; // the header line
        function pump() {
          return reader.read().then(function (chunk) {
            if (chunk.done) {
              var link = document.createElement("a");
              link.href = URL.createObjectURL(new Blob(parts, { type: "text/csv" }));
              link.download = name || "messages.csv";
              document.body.appendChild(link);
              link.click();
              link.remove();
              bar.value = bar.max;
              status.textContent = "Done: " + Math.max(rows, 0).toLocaleString() + " messages.";
              box.setAttribute("data-done", "1");
              return;
            }
            parts.push(chunk.value);
            for (var i = 0; i < chunk.value.length; i++) if (chunk.value[i] === 10) rows++;
            bar.value = Math.min(Math.max(rows, 0), bar.max);
            status.textContent = Math.max(rows, 0).toLocaleString() + " of " + total.toLocaleString() + " messages…";
            return pump();
          });
        }
        return pump();
      })
      .catch(function (error) { status.textContent = String(error.message || error); });
  });
})();
