// Purgatory console: confirmations, live outcomes over server-sent events, chart refresh.
// Every string from the server is put in the page with textContent: never parsed as HTML.
"use strict";

document.addEventListener("submit", (event) => {
  const form = event.target;
  const question = form.getAttribute("data-confirm");
  if (question && !window.confirm(question)) {
    event.preventDefault();
  }
});

function refreshCharts() {
  for (const img of document.querySelectorAll("img[data-live]")) {
    const base = img.getAttribute("src").split("?")[0];
    img.setAttribute("src", base + "?t=" + Date.now());
  }
}

function cell(row, text, numeric) {
  const td = row.insertCell();
  td.textContent = text;
  if (numeric) td.className = "num";
  return td;
}

function startLive(root) {
  const body = root.querySelector("tbody");
  const status = document.getElementById("live-status");
  const pause = document.getElementById("pause");
  const filter = document.getElementById("filter");
  const base = root.getAttribute("data-stream").split("?")[0];
  let last = Number(root.getAttribute("data-after"));
  let source = null;
  let shown = 0;
  let sampling = false;
  const MAX_ROWS = 500;

  function matches(row) {
    const f = filter.value.trim().toLowerCase();
    return !f || row.getAttribute("data-text").includes(f);
  }

  function add(data) {
    const empty = body.querySelector("td.empty");
    if (empty) empty.parentElement.remove();
    const row = body.insertRow(0);
    row.className = "outcome";
    cell(row, String(data.sequence), true);
    const id = cell(row, "", false);
    const code = document.createElement("code");
    code.textContent = data.operation_id;
    id.appendChild(code);
    cell(row, data.state, false);
    cell(row, data.keys.join(", "), false);
    cell(row, data.waited_ms + " ms", true);
    cell(row, new Date(data.complete_time_ms).toISOString().replace("T", " ").replace("Z", " UTC"), false);
    row.setAttribute("data-text", [data.operation_id, data.state, ...data.keys].join(" ").toLowerCase());
    row.hidden = !matches(row);
    shown += 1;
    if (shown > MAX_ROWS) body.deleteRow(-1);
  }

  function note(text) {
    const empty = body.querySelector("td.empty");
    if (empty) empty.parentElement.remove();
    const row = body.insertRow(0);
    row.className = "gap";
    const td = row.insertCell();
    td.colSpan = 6;
    td.textContent = text;
    shown += 1;
    if (shown > MAX_ROWS) body.deleteRow(-1);
  }

  function open() {
    source = new EventSource(base + "?after=" + last);
    source.addEventListener("open", () => { status.textContent = "live after sequence " + last; });
    source.addEventListener("outcome", (event) => {
      const data = JSON.parse(event.data);
      if (data.sequence <= last) return;
      last = data.sequence;
      add(data);
      status.textContent = (sampling ? "showing a sample: last sequence " : "live: last sequence ") + last;
    });
    source.addEventListener("sampling", (event) => {
      const data = JSON.parse(event.data);
      sampling = true;
      status.textContent = "showing a sample: more than " + data.cap_per_s + " outcomes a second (last shown #" + data.after + ")";
    });
    source.addEventListener("skipped", (event) => {
      const data = JSON.parse(event.data);
      note("showing a sample: " + data.count + " skipped between #" + data.after + " and #" + data.next);
    });
    source.addEventListener("jumped", (event) => {
      const data = JSON.parse(event.data);
      const from = data.after === null ? "" : " after #" + data.after;
      note("could not resume" + from + ": " + data.reason + "; jumped to now");
      status.textContent = "live from now (" + data.reason + ")";
    });
    source.addEventListener("gapfree", (event) => {
      const data = JSON.parse(event.data);
      sampling = false;
      note("every outcome shown again after #" + data.after);
      status.textContent = "live: last sequence " + last;
    });
    source.addEventListener("refused", (event) => {
      const data = JSON.parse(event.data);
      status.textContent = "refused: " + data.status + ": " + data.message;
      source.close();
    });
    source.addEventListener("error", () => {
      if (source.readyState !== EventSource.CLOSED) status.textContent = "reconnecting after sequence " + last + "…";
    });
  }

  pause.addEventListener("click", () => {
    if (source) {
      source.close();
      source = null;
      pause.textContent = "Resume";
      status.textContent = "paused after sequence " + last;
    } else {
      pause.textContent = "Pause";
      open();
    }
  });
  filter.addEventListener("input", () => {
    for (const row of body.querySelectorAll("tr.outcome")) row.hidden = !matches(row);
  });
  open();
}

document.addEventListener("DOMContentLoaded", () => {
  const live = document.getElementById("live");
  if (live) startLive(live);
  if (document.querySelector("img[data-live]")) setInterval(refreshCharts, 5000);
});
