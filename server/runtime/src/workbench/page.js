// The workbench page. Calls: the stream at /ui/events (the server's ring, then each new call,
// and `dev`'s reloads), newest first, filtered by tool and outcome; a call's row, clicked or
// chosen with Enter, shows its request and response. Tools, resources and prompts: listed
// over the server's own MCP endpoint (/mcp) in a session of the page's, each with a form made
// from its schema; the page checks nothing itself, so the messages a bad argument gets are
// the server's. Examples: the spec's, run by the server with every write rolled back.
// Every value is set as text, never as markup.
"use strict";

const $ = (id) => document.getElementById(id);
const MAX = 1000;
const PROTOCOL = "2025-11-25";

// ---- the token, when the server asks for one -------------------------------------------

let token = sessionStorage.getItem("mcpspec-token") || "";
let loginWaiters = [];

function authHeaders(extra) {
  const h = Object.assign({}, extra || {});
  if (token) h["Authorization"] = "Bearer " + token;
  return h;
}

// Resolves once the user has given a token (after a 401).
function askForToken(message) {
  $("login").hidden = false;
  $("login-error").textContent = message || "";
  $("token").focus();
  return new Promise((resolve) => loginWaiters.push(resolve));
}

$("login").addEventListener("submit", (e) => {
  e.preventDefault();
  token = $("token").value.trim();
  sessionStorage.setItem("mcpspec-token", token);
  $("login").hidden = true;
  const waiting = loginWaiters;
  loginWaiters = [];
  waiting.forEach((w) => w());
});

// fetch, asking for a token and trying again while the server answers 401.
async function authorized(url, init) {
  for (;;) {
    const r = await fetch(url, Object.assign({}, init, { headers: authHeaders(init && init.headers) }));
    if (r.status !== 401) return r;
    let why = "";
    try { why = (await r.json()).message || ""; } catch (_) { /* not JSON */ }
    await askForToken(token ? "The server refused that token: " + why : "");
  }
}

// ---- tabs ------------------------------------------------------------------------------

const tabs = Array.from(document.querySelectorAll('[role="tab"]'));

function select(tab) {
  for (const t of tabs) {
    const on = t === tab;
    t.setAttribute("aria-selected", String(on));
    t.tabIndex = on ? 0 : -1;
    $(t.getAttribute("aria-controls")).hidden = !on;
  }
  tab.focus();
  if (tab.id === "tab-examples") loadExamples();
}

tabs.forEach((t, i) => {
  t.addEventListener("click", () => select(t));
  t.addEventListener("keydown", (e) => {
    const step = e.key === "ArrowRight" ? 1 : e.key === "ArrowLeft" ? -1 : 0;
    if (step) select(tabs[(i + step + tabs.length) % tabs.length]);
  });
});

// ---- small DOM helpers -----------------------------------------------------------------

function el(tag, props, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (k === "text") e.textContent = v;
    else if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) if (c) e.appendChild(c);
  return e;
}

const pretty = (v) => JSON.stringify(v, null, 2);
let uid = 0;
const nextId = (base) => base + "-" + (++uid);

// ---- calls -----------------------------------------------------------------------------

const calls = [];
const seen = new Set();
const body = document.querySelector("#calls tbody");

function shown(call) {
  const tool = $("tool").value.trim();
  if (tool && !call.tool.includes(tool)) return false;
  const outcome = $("outcome").value;
  if (outcome === "ok") return call.outcome === "ok";
  if (outcome === "error") return call.outcome !== "ok";
  return true;
}

function row(call) {
  const tr = el("tr", { tabindex: "0", "data-seq": String(call.seq), class: call.outcome === "ok" ? "" : "failed" });
  for (const text of [new Date(call.at_ms).toLocaleTimeString(), call.method, call.tool, call.outcome,
    String(call.duration_ms), String(call.result_bytes), call.client || "", call.caller || ""]) {
    tr.appendChild(el("td", { text }));
  }
  // The whole call (its response and statements with it) is read when it is opened.
  const open = async () => {
    showDetail(call);
    const r = await authorized("/ui/calls/" + call.seq, {});
    if (r.ok) showDetail(await r.json());
  };
  tr.addEventListener("click", open);
  tr.addEventListener("keydown", (e) => { if (e.key === "Enter") open(); });
  return tr;
}

// A call opened: its trace id, the statements it ran (a table), and the rest as JSON.
function showDetail(call) {
  const { statements, ...rest } = call;
  $("trace").hidden = !call.trace;
  $("trace").textContent = call.trace ? "Trace " + call.trace : "";
  const ran = (statements && statements.kept) || [];
  const table = $("statements");
  table.hidden = ran.length === 0;
  const rows = ran.map((s) => el("tr", { class: s.failed ? "failed" : "" },
    el("td", { text: s.name || "(the handler's own)" }), el("td", { text: s.operation || "" }),
    el("td", { text: String(s.duration_ms) }), el("td", { text: s.failed || "" })));
  if (statements && statements.more) {
    rows.push(el("tr", {}, el("td", { colspan: "4", text: "and " + statements.more + " more" })));
  }
  table.querySelector("tbody").replaceChildren(...rows);
  $("detail").textContent = pretty(rest);
}

function render() {
  body.replaceChildren(...calls.filter(shown).map(row));
  $("empty").hidden = calls.length > 0;
}

let pending = false;
function addCall(call) {
  if (seen.has(call.seq)) return;
  seen.add(call.seq);
  calls.unshift(call);
  if (calls.length > MAX) seen.delete(calls.pop().seq);
  // One render a frame, however many calls arrive in it.
  if (!pending) {
    pending = true;
    requestAnimationFrame(() => { pending = false; render(); });
  }
}

$("tool").addEventListener("input", render);
$("outcome").addEventListener("change", render);

// Server-Sent Events read with fetch, which (unlike EventSource) can send the token.
function dispatchEvent(block) {
  let name = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (line.startsWith("event:")) name = line.slice(6).trim();
    else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
  }
  if (!data.length) return;
  const value = JSON.parse(data.join("\n"));
  if (name === "keeping") $("history").hidden = value.history;
  else if (name === "reload") reloaded(value);
  else if (name === "skipped") skippedCalls(value.skipped);
  else addCall(value);
}

// Calls that came faster than the page is sent them (more than 1,000 a second): the first of
// each tenth of a second are listed (those whose answers were kept), and the page says how
// many it did not list.
let skipped = 0;
function skippedCalls(n) {
  skipped += n;
  $("skipped").hidden = false;
  $("skipped").textContent = skipped + " calls came too fast to list live (each tenth of a second lists the first 100, whose answers are kept); the server keeps the last 1,000 (GET /ui/calls).";
}

// Resolved once the stream is open: the server keeps calls while a page is open, so the
// page's own requests wait for it, to be listed too.
let streamOpened;
const streamOpen = new Promise((resolve) => { streamOpened = resolve; });

async function follow() {
  for (let wait = 500; ; wait = Math.min(wait * 2, 8000)) {
    try {
      const r = await authorized("/ui/events", {});
      if (!r.ok) throw new Error("HTTP " + r.status);
      $("status").textContent = "live";
      streamOpened();
      wait = 500;
      const reader = r.body.getReader();
      const text = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += text.decode(value, { stream: true });
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          dispatchEvent(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
        }
      }
    } catch (_) { /* retried below */ }
    $("status").textContent = "disconnected; retrying…";
    await new Promise((r) => setTimeout(r, wait));
  }
}

// ---- the page's MCP session ------------------------------------------------------------

let session = null;
let nextRequest = 1;

// The JSON-RPC answer to `id` in a response that is JSON or an event stream.
async function answerOf(r, id) {
  const type = r.headers.get("content-type") || "";
  const text = await r.text();
  if (!type.includes("text/event-stream")) return text ? JSON.parse(text) : null;
  for (const block of text.split("\n\n")) {
    const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim()).join("\n");
    if (!data) continue;
    const message = JSON.parse(data);
    if (message.id === id) return message;
  }
  return null;
}

async function post(message) {
  const headers = { "Content-Type": "application/json", "Accept": "application/json, text/event-stream" };
  if (session) {
    headers["Mcp-Session-Id"] = session.id;
    headers["MCP-Protocol-Version"] = session.protocol;
  }
  return authorized("/mcp", { method: "POST", headers, body: JSON.stringify(message) });
}

async function connect() {
  session = null;
  const id = nextRequest++;
  const r = await post({ jsonrpc: "2.0", id, method: "initialize", params: {
    protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: "mcpspec-workbench", version: "1" } } });
  const answer = await answerOf(r, id);
  if (!answer || !answer.result) throw new Error("initialize failed: " + pretty(answer || r.status));
  session = { id: r.headers.get("mcp-session-id"), protocol: answer.result.protocolVersion, info: answer.result };
  await post({ jsonrpc: "2.0", method: "notifications/initialized" });
  const info = answer.result.serverInfo || {};
  $("server").textContent = (info.title || info.name || "") + (info.version ? " " + info.version : "");
  return session;
}

// The session being opened: the requests the page makes at once (its lists, on load) share
// one session rather than each opening its own.
let connecting = null;
function reconnect() {
  if (!connecting) connecting = connect().finally(() => { connecting = null; });
  return connecting;
}

// A request in the page's session; a session the server no longer knows is opened again.
async function rpc(method, params) {
  if (!session) await reconnect();
  for (let attempt = 0; ; attempt++) {
    const id = nextRequest++;
    const r = await post({ jsonrpc: "2.0", id, method, params: params || {} });
    if (r.status === 404 && attempt === 0) { await reconnect(); continue; }
    const answer = await answerOf(r, id);
    if (!answer) return { error: { code: r.status, message: "HTTP " + r.status } };
    return answer;
  }
}

// Every page of a list method.
async function listAll(method, key) {
  const all = [];
  let cursor;
  do {
    const a = await rpc(method, cursor ? { cursor } : {});
    if (a.error) return all;
    all.push(...(a.result[key] || []));
    cursor = a.result.nextCursor;
  } while (cursor);
  return all;
}

// ---- forms from JSON Schema ------------------------------------------------------------

// A field for `schema` at `path` (names joined by "."); returns {node, read}, where read()
// gives the value to send or undefined to leave it out. The page validates nothing: a value
// it cannot read as the schema's type is sent as typed, so that the server says what is wrong.
function field(schema, name, path, required) {
  schema = schema || {};
  const id = nextId("f");
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== "null") : schema.type;
  const bounds = [schema.default !== undefined ? "default " + JSON.stringify(schema.default) : "",
    schema.minimum !== undefined ? "at least " + schema.minimum : "", schema.maximum !== undefined ? "at most " + schema.maximum : "",
    schema.maxLength !== undefined ? "up to " + schema.maxLength + " characters" : ""].filter(Boolean);
  const hint = [schema.description || "", bounds.length ? "(" + bounds.join(", ") + ")" : ""].filter(Boolean).join(" ");
  const label = el("label", { for: id }, el("span", { text: name }), required ? el("span", { class: "required", text: " *", "aria-hidden": "true" }) : null);
  const hintId = id + "-hint";
  const messageId = id + "-message";
  const common = { id, name: path, "data-path": path, "aria-describedby": hintId + " " + messageId, "aria-required": required ? "true" : null };
  let input;
  let read;
  if (type === "object" && schema.properties) {
    const fs = el("fieldset", { "data-path": path }, el("legend", { text: name + (required ? " *" : "") }));
    const parts = Object.entries(schema.properties).map(([k, s]) => {
      const f = field(s, k, path ? path + "." + k : k, (schema.required || []).includes(k));
      fs.appendChild(f.node);
      return [k, f];
    });
    const out = el("div", { class: "field" }, fs, el("p", { id: messageId, class: "message", role: "alert" }));
    return { node: out, read: () => {
      const v = {};
      for (const [k, f] of parts) { const x = f.read(); if (x !== undefined) v[k] = x; }
      return Object.keys(v).length || required ? v : undefined;
    } };
  }
  if (Array.isArray(schema.enum)) {
    input = el("select", common, el("option", { value: "", text: required ? "choose…" : "(leave out)" }),
      ...schema.enum.map((v, i) => el("option", { value: String(i), text: JSON.stringify(v) })));
    read = () => input.value === "" ? undefined : schema.enum[Number(input.value)];
  } else if (type === "boolean") {
    input = el("select", common, el("option", { value: "", text: "(leave out)" }), el("option", { value: "true", text: "true" }), el("option", { value: "false", text: "false" }));
    read = () => input.value === "" ? undefined : input.value === "true";
  } else if (type === "integer" || type === "number") {
    input = el("input", Object.assign({ type: "text", inputmode: "decimal", placeholder: schema.default !== undefined ? String(schema.default) : "" }, common));
    read = () => {
      const t = input.value.trim();
      if (t === "") return undefined;
      const n = Number(t);
      return Number.isFinite(n) ? n : t;
    };
  } else if (type === "array" && schema.items && ["string", "integer", "number"].includes(schema.items.type)) {
    input = el("textarea", Object.assign({ rows: "3", placeholder: "one per line" }, common));
    read = () => {
      const lines = input.value.split("\n").map((l) => l.trim()).filter((l) => l !== "");
      if (!lines.length) return undefined;
      return schema.items.type === "string" ? lines : lines.map((l) => (Number.isFinite(Number(l)) ? Number(l) : l));
    };
  } else if (type === "string") {
    const long = !(schema.maxLength <= 200) && !schema.format && !schema.singleLine;
    input = el(long ? "textarea" : "input", Object.assign(long ? { rows: "3" } : { type: "text" },
      { placeholder: schema.default !== undefined ? String(schema.default) : "" }, common));
    read = () => (input.value === "" ? undefined : input.value);
  } else {
    input = el("textarea", Object.assign({ rows: "3", placeholder: "JSON" }, common));
    read = () => {
      const t = input.value.trim();
      if (t === "") return undefined;
      try { return JSON.parse(t); } catch (_) { return t; }
    };
  }
  const node = el("div", { class: "field" }, label, input, el("p", { id: hintId, class: "hint", text: hint }),
    el("p", { id: messageId, class: "message", role: "alert" }));
  return { node, read };
}

// A form for `schema` (an object schema) whose submit runs `act(values)`.
function schemaForm(schema, button, act) {
  const form = el("form", { novalidate: true, class: "try" });
  const root = field(Object.assign({ type: "object", properties: {} }, schema), "", "", true);
  // The root's fieldset without its legend.
  const fields = root.node.querySelector("fieldset");
  fields.querySelector("legend").remove();
  fields.className = "root";
  form.appendChild(fields);
  form.appendChild(el("button", { type: "submit", text: button }));
  form.addEventListener("submit", (e) => { e.preventDefault(); act(root.read() || {}); });
  return form;
}

// Shows each of a failure's field errors beside its field; returns those shown elsewhere.
function markFields(form, errors) {
  form.querySelectorAll(".message").forEach((m) => { m.textContent = ""; });
  form.querySelectorAll("[aria-invalid]").forEach((f) => f.removeAttribute("aria-invalid"));
  const rest = [];
  for (const e of errors) {
    const path = String(e.field || "").replace(/\[(\d+)\]/g, ".$1").replace(/^\//, "").replace(/\//g, ".");
    let at = null;
    for (let p = path; p && !at; p = p.includes(".") ? p.slice(0, p.lastIndexOf(".")) : "") {
      at = Array.from(form.querySelectorAll("[data-path]")).find((n) => n.dataset.path === p);
    }
    if (!at) { rest.push(e); continue; }
    at.setAttribute("aria-invalid", "true");
    const message = at.closest(".field").querySelector(".message");
    message.textContent = (message.textContent ? message.textContent + " " : "") + e.message;
  }
  return rest;
}

function badge(text) { return el("span", { class: "badge", text }); }

// ---- tools -----------------------------------------------------------------------------

let tools = [];

async function loadTools() {
  tools = await listAll("tools/list", "tools");
  const list = $("tool-list");
  list.replaceChildren(...tools.map((t) => el("li", {}, el("button", { type: "button", "data-tool": t.name,
    text: t.title || (t.annotations && t.annotations.title) || t.name, onclick: () => showTool(t) }))));
  const open = $("tool-view").dataset.tool;
  const again = tools.find((t) => t.name === open);
  if (again) showTool(again);
  else if (open) $("tool-view").replaceChildren(el("p", { text: "`" + open + "` is no longer served." }));
}

function showTool(tool) {
  const view = $("tool-view");
  view.dataset.tool = tool.name;
  const a = tool.annotations || {};
  const badges = el("p", { class: "badges" },
    ...["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"].filter((k) => a[k] !== undefined)
      .map((k) => badge(k.replace("Hint", "") + ": " + a[k])));
  const scopes = tool._meta && (tool._meta.scopes || tool._meta["io.mcpspec/scopes"]);
  if (scopes) badges.appendChild(badge("scopes: " + [].concat(scopes).join(" ")));
  const result = el("pre", { class: "result", tabindex: "0", "aria-live": "polite", "aria-label": "Result" });
  const form = schemaForm(tool.inputSchema, "Call " + tool.name, async (args) => {
    result.textContent = "calling…";
    result.className = "result";
    const a = await rpc("tools/call", { name: tool.name, arguments: args });
    if (a.error) {
      result.className = "result failed";
      result.textContent = "protocol error " + a.error.code + ": " + a.error.message + (a.error.data ? "\n" + pretty(a.error.data) : "");
      return;
    }
    const r = a.result;
    let failure = null;
    if (r.isError) {
      const text = (r.content || []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
      try { failure = JSON.parse(text).error; } catch (_) { failure = { message: text }; }
    }
    const errors = failure ? (failure.errors || (failure.field ? [failure] : [])) : [];
    markFields(form, errors);
    result.className = failure ? "result failed" : "result";
    result.textContent = failure
      ? (failure.code ? failure.code + ": " : "") + failure.message + "\n\n" + pretty(failure)
      : r.structuredContent !== undefined ? pretty(r.structuredContent) : (r.content || []).map((c) => c.type === "text" ? c.text : pretty(c)).join("\n");
  });
  view.replaceChildren(
    el("h2", { text: tool.title || tool.name }),
    el("p", { class: "wire", text: tool.name }),
    el("p", { text: tool.description || "" }),
    badges, form, el("h3", { text: "Result" }), result);
}

// ---- resources -------------------------------------------------------------------------

async function loadResources() {
  const fixed = await listAll("resources/list", "resources");
  const templates = await listAll("resources/templates/list", "resourceTemplates");
  const list = $("resource-list");
  list.replaceChildren(
    ...fixed.map((r) => el("li", {}, el("button", { type: "button", "data-name": r.name, text: r.title || r.name || r.uri, onclick: () => showResource(r, null) }))),
    ...templates.map((t) => el("li", {}, el("button", { type: "button", "data-name": t.name, text: (t.title || t.name) + " (template)", onclick: () => showResource(null, t) }))));
}

function showResource(resource, template) {
  const it = resource || template;
  const out = el("pre", { class: "result", tabindex: "0", "aria-live": "polite", "aria-label": "Contents" });
  const read = async (uri) => {
    out.textContent = "reading " + uri + "…";
    const a = await rpc("resources/read", { uri });
    out.className = a.error ? "result failed" : "result";
    out.textContent = a.error ? a.error.code + ": " + a.error.message
      : a.result.contents.map((c) => c.text !== undefined ? c.text : "(" + (c.mimeType || "binary") + ", " + (c.blob || "").length + " base64 characters)").join("\n");
  };
  let form;
  if (template) {
    const names = Array.from(template.uriTemplate.matchAll(/\{[+#./;?&]?([^}]+)\}/g)).flatMap((m) => m[1].split(","));
    const props = Object.fromEntries(names.map((n) => [n, { type: "string", singleLine: true }]));
    form = schemaForm({ properties: props, required: names }, "Read", (v) => {
      const uri = template.uriTemplate.replace(/\{[+#./;?&]?([^}]+)\}/g, (_, n) => n.split(",").map((k) => encodeURIComponent(v[k] || "")).join(","));
      read(uri);
    });
  } else {
    form = el("form", { class: "try" }, el("button", { type: "submit", text: "Read" }));
    form.addEventListener("submit", (e) => { e.preventDefault(); read(resource.uri); });
  }
  $("resource-view").replaceChildren(el("h2", { text: it.title || it.name }),
    el("p", { class: "wire", text: resource ? resource.uri : template.uriTemplate }),
    el("p", { text: it.description || "" }), form, el("h3", { text: "Contents" }), out);
}

// ---- prompts ---------------------------------------------------------------------------

async function loadPrompts() {
  const prompts = await listAll("prompts/list", "prompts");
  $("prompt-list").replaceChildren(...prompts.map((p) => el("li", {}, el("button", { type: "button", "data-name": p.name, text: p.title || p.name, onclick: () => showPrompt(p) }))));
}

// A prompt message's content as text: its text, an embedded resource's address and text.
function messageText(c) {
  if (c.type === "text") return c.text;
  if (c.type === "resource" && c.resource) {
    return "(resource " + c.resource.uri + (c.resource.mimeType ? ", " + c.resource.mimeType : "") + ")\n" +
      (c.resource.text !== undefined ? c.resource.text : "(binary)");
  }
  return pretty(c);
}

function showPrompt(prompt) {
  const out = el("pre", { class: "result", tabindex: "0", "aria-live": "polite", "aria-label": "Messages" });
  const args = prompt.arguments || [];
  const schema = { properties: Object.fromEntries(args.map((a) => [a.name, { type: "string", singleLine: true, description: a.description }])),
    required: args.filter((a) => a.required).map((a) => a.name) };
  const form = schemaForm(schema, "Render", async (v) => {
    const a = await rpc("prompts/get", { name: prompt.name, arguments: v });
    out.className = a.error ? "result failed" : "result";
    out.textContent = a.error ? a.error.code + ": " + a.error.message
      : a.result.messages.map((m) => "[" + m.role + "]\n" + messageText(m.content)).join("\n\n");
  });
  $("prompt-view").replaceChildren(el("h2", { text: prompt.title || prompt.name }), el("p", { class: "wire", text: prompt.name }),
    el("p", { text: prompt.description || "" }), form, el("h3", { text: "Messages" }), out);
}

// ---- examples --------------------------------------------------------------------------

async function runExamples(which) {
  const r = await authorized("/ui/examples" + (which === undefined ? "" : "/" + which),
    { method: "POST", headers: { "Mcpspec-Workbench": "1" } });
  const v = await r.json().catch(() => ({ error: "HTTP " + r.status }));
  if (v.error) { $("examples-summary").textContent = v.error; return; }
  for (const ran of v.ran) {
    const cell = document.querySelector('#examples [data-example="' + ran.n + '"]');
    if (!cell) continue;
    cell.textContent = ran.passed ? "passed" : "failed: " + ran.failure;
    cell.className = ran.passed ? "passed" : "failed";
  }
  const passed = v.ran.filter((x) => x.passed).length;
  $("examples-summary").textContent = passed + " passed, " + (v.ran.length - passed) + " failed";
}

async function loadExamples() {
  const r = await authorized("/ui/examples", {});
  if (!r.ok) return;
  const v = await r.json();
  document.querySelector("#examples tbody").replaceChildren(...v.examples.map((x) => el("tr", {},
    el("td", { text: x.tool }), el("td", { text: x.at }), el("td", {}, el("code", { text: JSON.stringify(x.arguments) })),
    el("td", { text: JSON.stringify(x.expect) }),
    el("td", { "data-example": String(x.n), class: x.runs ? "" : "skipped", text: x.runs ? "" : "not here: " + x.why_not }),
    el("td", {}, x.runs ? el("button", { type: "button", text: "Run", "aria-label": "Run the example at " + x.at, onclick: () => runExamples(x.n) }) : null))));
  $("examples-summary").textContent = v.examples.length ? "" : "The spec has no examples.";
}

$("run-all").addEventListener("click", () => runExamples());

// ---- dev's reloads ---------------------------------------------------------------------

function reloaded(status) {
  if (!status.ok) {
    $("problems").textContent = status.problems;
    $("problems-box").hidden = false;
    return;
  }
  $("problems-box").hidden = true;
  $("status").textContent = "live; reloaded (" + status.tools + " tools)";
  loadLists();
  if (!$("examples-panel").hidden) loadExamples();
}

function loadLists() {
  return Promise.all([loadTools(), loadResources(), loadPrompts()]).catch((e) => {
    $("status").textContent = "could not list the server's tools: " + e.message;
  });
}

follow();
streamOpen.then(loadLists);
