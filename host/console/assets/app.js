// Crank console: catalogs, their operations, and an editor that validates
// and saves an operation through the admin API (docs/admin-api.md),
// served under ./api/ by the console handler.

const $ = (sel) => document.querySelector(sel);

const state = {
  catalog: "",     // the open catalog
  etag: "",        // its version as the last read saw it
  operations: [],  // its entries
  editing: null,   // name of the operation in the editor, "" for a new one
};

// api calls the admin API and answers {status, body, etag}; body is the
// parsed JSON answer (or {error} for a non-JSON one).
async function api(method, path, body, headers = {}) {
  const init = { method, headers: { ...headers } };
  if (body !== undefined) {
    init.body = typeof body === "string" ? body : JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  const resp = await fetch("api/" + path, init);
  const text = await resp.text();
  let parsed;
  try { parsed = text ? JSON.parse(text) : {}; } catch { parsed = { error: text }; }
  return { status: resp.status, body: parsed, etag: resp.headers.get("ETag") || "" };
}

function say(msg) { $("#status").textContent = msg; }

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
}

async function loadCatalogs() {
  const r = await api("GET", "catalogs?limit=1000");
  const ul = $("#catalogs");
  ul.replaceChildren();
  if (r.status !== 200) { say(r.body.error || `catalogs: ${r.status}`); return; }
  for (const c of r.body.catalogs) {
    const label = c.deleted ? `${c.catalog} (deleted)` : `${c.catalog} · v${c.version}`;
    ul.append(el("li", {}, el("button", {
      type: "button", "data-catalog": c.catalog,
      "aria-current": String(c.catalog === state.catalog),
      onclick: () => openCatalog(c.catalog),
    }, label)));
  }
  if (r.body.catalogs.length === 0) ul.append(el("li", {}, "No catalog yet."));
}

async function openCatalog(name) {
  if (name !== state.catalog) $("#history-pane").hidden = true;
  state.catalog = name;
  const r = await api("GET", "catalogs/" + encodeURIComponent(name));
  $("#ops-pane").hidden = false;
  $("#ops-title").textContent = `Operations of ${name}`;
  if (r.status === 404) {
    state.etag = "";
    state.operations = [];
    $("#catalog-version").textContent = "A new catalog: saving an operation creates it.";
  } else if (r.status !== 200) {
    say(r.body.error || `catalog ${name}: ${r.status}`);
    return;
  } else {
    state.etag = r.etag;
    state.operations = r.body.operations || [];
    const h = r.body.catalog;
    $("#catalog-version").textContent = `Version ${h.version}, by ${h.author}${h.deleted ? " (deleted)" : ""}`;
  }
  renderOperations();
  await loadCatalogs();
}

function renderOperations() {
  const q = $("#ops-filter").value.trim().toLowerCase();
  const tbody = $("#ops tbody");
  tbody.replaceChildren();
  for (const op of state.operations) {
    const mode = op.mode || "unary";
    if (q && ![op.name, op.adapter, mode].some((s) => (s || "").toLowerCase().includes(q))) continue;
    tbody.append(el("tr", {},
      el("td", {}, el("button", { type: "button", "data-op": op.name, onclick: () => editOperation(op.name) }, op.name)),
      el("td", {}, el("span", { class: `badge ${mode}` }, mode)),
      el("td", {}, op.adapter || ""),
      el("td", {}, op.description || "")));
  }
}

function editOperation(name) {
  const op = state.operations.find((o) => o.name === name);
  state.editing = name;
  $("#editor-title").textContent = `Operation ${name}`;
  $("#entry").value = JSON.stringify(op, null, 2);
  showProblems(null);
  $("#editor-pane").hidden = false;
  $("#entry").focus();
}

function newOperation() {
  state.editing = "";
  $("#editor-title").textContent = "New operation";
  $("#entry").value = JSON.stringify({
    name: "", description: "", adapter: "rest",
    config: { method: "GET", url: "https://api.example.com/items/{id}" },
  }, null, 2);
  showProblems(null);
  $("#editor-pane").hidden = false;
  $("#entry").focus();
}

// showProblems lists an answer's errors and warnings, each with the JSON
// pointer and line it concerns.
function showProblems(body, okText) {
  const box = $("#problems");
  box.replaceChildren();
  if (!body) return;
  const line = (p, cls) => el("p", { class: cls, "data-pointer": p.pointer || "" },
    p.pointer ? el("span", { class: "pointer" }, p.pointer) : "",
    p.pointer ? ": " : "", p.message, p.line ? ` (line ${p.line})` : "");
  for (const p of body.errors || []) box.append(line(p, "problem"));
  for (const p of body.warnings || []) box.append(line(p, "warning"));
  if (body.error && !(body.errors || []).length) box.append(el("p", { class: "problem" }, body.error));
  if (okText) box.append(el("p", { class: "ok" }, okText));
}

function entryPath() {
  return "catalogs/" + encodeURIComponent(state.catalog);
}

async function validate() {
  const q = state.editing ? `operation=${encodeURIComponent(state.editing)}` : "entry=true";
  const r = await api("POST", `${entryPath()}/validate?${q}`, $("#entry").value);
  if (r.status !== 200) { showProblems(r.body); return; }
  showProblems(r.body, r.body.valid ? "Valid: saving would load." : "");
  say(r.body.valid ? "Valid" : "Not valid");
}

async function save(ev) {
  ev.preventDefault();
  const headers = {};
  if (state.etag) headers["If-Match"] = state.etag; else headers["If-None-Match"] = "*";
  const msg = $("#message").value;
  const q = msg ? `?message=${encodeURIComponent(msg)}` : "";
  let r;
  if (state.editing) {
    r = await api("PUT", `${entryPath()}/operations/${encodeURIComponent(state.editing)}${q}`, $("#entry").value, headers);
  } else {
    r = await api("POST", `${entryPath()}/operations${q}`, $("#entry").value, headers);
  }
  if (r.status !== 200 && r.status !== 201) {
    showProblems(r.body);
    say(r.status === 409 && r.body.current_version
      ? `Not saved: the catalog is at version ${r.body.current_version} now; reopen it.`
      : "Not saved");
    return;
  }
  const v = r.body.catalog.version;
  let name = state.editing;
  try { name = JSON.parse($("#entry").value).name || name; } catch { /* YAML: keep the name */ }
  $("#message").value = "";
  say(`Saved: ${state.catalog} version ${v}`);
  await openCatalog(state.catalog);
  if (state.operations.some((o) => o.name === name)) editOperation(name);
  showProblems(r.body, `Saved as version ${v}.`);
}

async function showHistory() {
  $("#history-pane").hidden = false;
  const r = await api("GET", `${entryPath()}/versions?limit=20`);
  const tbody = $("#history tbody");
  tbody.replaceChildren();
  $("#diff").textContent = "";
  if (r.status !== 200) { say(r.body.error || `history: ${r.status}`); return; }
  const current = Number(state.etag.replaceAll('"', ""));
  for (const v of r.body.versions) {
    const actions = el("td", {},
      el("button", { type: "button", "data-diff": v.version, onclick: () => showDiff(v.version) }, "Diff"));
    if (v.version !== current) {
      actions.append(" ", el("button", { type: "button", "data-rollback": v.version, onclick: () => rollback(v.version) }, "Roll back"));
    }
    tbody.append(el("tr", {},
      el("td", {}, String(v.version)),
      el("td", {}, v.action + (v.rollback_of ? ` of ${v.rollback_of}` : "")),
      el("td", {}, v.author + (v.operator ? ` (${v.operator})` : "")),
      el("td", {}, v.message || ""),
      actions));
  }
}

async function showDiff(version) {
  const r = await api("GET", `${entryPath()}/diff?from=${version - 1}&to=${version}`);
  if (r.status !== 200) { $("#diff").textContent = r.body.error || `diff: ${r.status}`; return; }
  const lines = [`Version ${r.body.from} → ${r.body.to}`];
  for (const c of r.body.changes || []) {
    lines.push(`${c.change} ${c.operation}`);
    for (const f of c.fields || []) {
      lines.push(`  ${f.pointer}: ${JSON.stringify(f.from)} → ${JSON.stringify(f.to)}`);
    }
  }
  $("#diff").textContent = lines.join("\n");
}

async function rollback(version) {
  const r = await api("POST", `${entryPath()}/rollback?version=${version}`, undefined,
    { "If-Match": state.etag || "*" });
  if (r.status !== 200) { say(r.body.error || `rollback: ${r.status}`); return; }
  await openCatalog(state.catalog);
  // The editor shows what is saved now.
  if (state.editing && state.operations.some((o) => o.name === state.editing)) editOperation(state.editing);
  await showHistory();
  say(`Rolled back to version ${version}: now version ${r.body.catalog.version}`);
}

// runTest runs the editor's draft (or, for YAML, the saved operation of
// its name) and shows what a client would get: the flags, warnings and
// result.
async function runTest(ev) {
  ev.preventDefault();
  let args;
  try { args = JSON.parse($("#test-args").value || "{}"); } catch (e) {
    say(`Arguments: not JSON (${e.message})`);
    return;
  }
  const req = { arguments: args };
  try { req.entry = JSON.parse($("#entry").value); } catch { req.operation = state.editing; }
  const flags = $("#test-flags");
  flags.replaceChildren();
  $("#test-warnings").replaceChildren();
  $("#test-result").textContent = "Running…";
  const r = await api("POST", `${entryPath()}/test`, req);
  if (r.status !== 200) {
    $("#test-result").textContent = "";
    showProblems(r.body);
    say("Test not run");
    return;
  }
  const t = r.body;
  const flag = (name, value, alarming) => flags.append(el("div", {},
    el("dt", {}, name), el("dd", { class: alarming ? "on" : "", "data-flag": name }, String(value))));
  flag("mode", t.mode);
  flag("is_error", !!t.is_error, !!t.is_error);
  flag("truncated", !!t.truncated, !!t.truncated);
  flag("window_complete", !!t.window_complete, t.mode === "window" && !t.window_complete);
  flag("has_more", !!t.has_more, false);
  flag("status", t.status || "—");
  flag("end_reason", t.end_reason || "—");
  flag("chunks", (t.progress || []).length);
  flag("duration", `${t.duration_ms} ms`);
  for (const w of t.warnings || []) $("#test-warnings").append(el("li", {}, w));
  $("#test-result").textContent = t.text || JSON.stringify(t.result, null, 2) || "";
  say(t.is_error ? "Test run: the call failed" : "Test run done");
}

function init() {
  $("#new-catalog").addEventListener("submit", (ev) => {
    ev.preventDefault();
    openCatalog($("#new-catalog-name").value.trim());
  });
  $("#ops-filter").addEventListener("input", renderOperations);
  $("#new-op").addEventListener("click", newOperation);
  $("#validate").addEventListener("click", validate);
  $("#editor").addEventListener("submit", save);
  $("#show-history").addEventListener("click", showHistory);
  $("#test-form").addEventListener("submit", runTest);
  $("#close").addEventListener("click", () => { $("#editor-pane").hidden = true; state.editing = null; });
  loadCatalogs().catch((e) => say(String(e)));
}

init();
