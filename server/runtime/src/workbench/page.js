// The workbench page: the calls from /events (the server's ring, then each new one), newest
// first, filtered by tool and outcome; a call's row, clicked or chosen with Enter, shows its
// arguments (sanitised by the server) and the rest of what was recorded. Every value is set
// as text, never as markup.
"use strict";

const MAX = 1000;
const calls = [];
const seen = new Set();
const body = document.querySelector("#calls tbody");
const status = document.getElementById("status");
const empty = document.getElementById("empty");
const detail = document.getElementById("detail");
const toolFilter = document.getElementById("tool");
const outcomeFilter = document.getElementById("outcome");

function shown(call) {
  const tool = toolFilter.value.trim();
  if (tool && !call.tool.includes(tool)) return false;
  const outcome = outcomeFilter.value;
  if (outcome === "ok") return call.outcome === "ok";
  if (outcome === "error") return call.outcome !== "ok";
  return true;
}

function cell(row, text) {
  const td = document.createElement("td");
  td.textContent = text;
  row.appendChild(td);
}

function row(call) {
  const tr = document.createElement("tr");
  tr.tabIndex = 0;
  tr.dataset.seq = String(call.seq);
  cell(tr, new Date(call.at_ms).toLocaleTimeString());
  cell(tr, call.tool);
  cell(tr, call.outcome);
  cell(tr, String(call.duration_ms));
  cell(tr, String(call.result_bytes));
  cell(tr, call.caller || "");
  if (call.outcome !== "ok") tr.className = "failed";
  const open = () => { detail.textContent = JSON.stringify(call, null, 2); };
  tr.addEventListener("click", open);
  tr.addEventListener("keydown", (e) => { if (e.key === "Enter") open(); });
  return tr;
}

function render() {
  body.replaceChildren(...calls.filter(shown).map(row));
  empty.hidden = calls.length > 0;
}

function add(call) {
  if (seen.has(call.seq)) return;
  seen.add(call.seq);
  calls.unshift(call);
  if (calls.length > MAX) seen.delete(calls.pop().seq);
}

toolFilter.addEventListener("input", render);
outcomeFilter.addEventListener("change", render);

const events = new EventSource("/events");
let pending = false;
events.onopen = () => { status.textContent = "live"; };
events.onerror = () => { status.textContent = "disconnected; retrying…"; };
events.onmessage = (e) => {
  add(JSON.parse(e.data));
  // One render a frame, however many calls arrive in it.
  if (!pending) {
    pending = true;
    requestAnimationFrame(() => { pending = false; render(); });
  }
};
