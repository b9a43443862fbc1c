// Crank console: the tools every handler serves, the catalogs with a form
// editor for their operations (validate, save, history, rollback, test
// run) and their rate limits, and the live state (adapter processes, rate
// limits, sessions, jobs), over the admin API (docs/admin-api.md), served
// under ./api/ by the console handler.

import { opFields, familyRoles, schemaFields, renderField, readField, setField, fieldError } from "./form.js";

const $ = (sel) => document.querySelector(sel);

const state = {
  view: "tools",
  catalog: "",     // the open catalog
  etag: "",        // its version as the last read saw it
  operations: [],  // its entries
  editing: null,   // name of the operation in the editor, "" for a new one
  entry: {},       // the entry the form edits
  adapters: [],    // /crank/adapters
  opSchema: null,  // /crank/schema/operation: the operation form's fields
  limitSchema: null, // /crank/schema/rate_limit: the rate limit form's fields
  limits: [],      // the open catalog's rate limits
  editingLimit: -1, // index of the limit in the form, limits.length for a new one
  tools: [],       // /crank/tools
  configRaw: false, // the adapter config is edited as JSON
  hand: {},        // the hand-driven session or job: {id, cursor}
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

// apiStream posts body to a streamed route (?stream=true) and calls
// onEvent for each NDJSON event as it arrives; it answers the final
// {result} or, for a refused request, {status, body}.
async function apiStream(path, body, onEvent) {
  const resp = await fetch("api/" + path, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  });
  if (resp.status !== 200 || !(resp.headers.get("Content-Type") || "").startsWith("application/x-ndjson")) {
    const text = await resp.text();
    let parsed;
    try { parsed = JSON.parse(text); } catch { parsed = { error: text }; }
    return { status: resp.status, body: parsed };
  }
  const reader = resp.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  let result = null;
  for (;;) {
    const { value, done } = await reader.read();
    if (value) buf += dec.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (!line) continue;
      const ev = JSON.parse(line);
      if (ev.result) result = ev.result; else onEvent(ev);
    }
    if (done) break;
  }
  if (!result) return { status: 502, body: { error: "the test run's stream ended without a result" } };
  return { status: 200, body: result };
}

function say(msg) { $("#status").textContent = msg; }

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) if (c !== undefined && c !== null) e.append(c);
  return e;
}

const badge = (mode) => el("span", { class: `badge ${mode}` }, mode);

// ---- screens ----

function showView(name) {
  state.view = name;
  for (const v of ["tools", "catalogs", "live"]) {
    $(`#view-${v}`).hidden = v !== name;
    const b = $(`#nav-${v}`);
    if (v === name) b.setAttribute("aria-current", "page"); else b.removeAttribute("aria-current");
  }
  if (name === "tools") loadTools().catch((e) => say(String(e)));
  if (name === "catalogs") loadCatalogs().catch((e) => say(String(e)));
  if (name === "live") loadLive().catch((e) => say(String(e)));
}

// ---- tools ----

// loadTools lists the tools the handlers serve, grouping each session or
// job family into one row, and the entries of catalogs no handler of this
// replica serves.
async function loadTools() {
  $("#tools").setAttribute("aria-busy", "true");
  try { await loadToolsNow(); } finally { $("#tools").setAttribute("aria-busy", "false"); }
}

async function loadToolsNow() {
  const [tr, er, cr] = await Promise.all([api("GET", "tools"), api("GET", "endpoints"), api("GET", "catalogs?limit=1000"), loadOpSchema()]);
  clearTimeout(state.toolsRetry);
  if (tr.status !== 200) {
    say(tr.body.error || `tools: ${tr.status}`);
    // A config still starting (the crank app not started yet, the state
    // store not reachable yet) answers 503: ask again.
    if (tr.status === 503) state.toolsRetry = setTimeout(() => { if (state.view === "tools") loadTools().catch((e) => say(String(e))); }, 1000);
    return;
  }
  state.tools = tr.body.tools || [];
  const rows = [];
  const families = new Map();
  for (const t of state.tools) {
    if (t.family) {
      const key = `${t.endpoint}/${t.family}`;
      if (families.has(key)) continue;
      const tools = {};
      for (const role of familyRoles(state.opSchema, t.mode)) {
        if (t.family_tools && t.family_tools[role]) tools[role] = t.family_tools[role];
      }
      const calls = { calls: 0, errors: 0, output_mismatches: 0 };
      for (const x of state.tools) {
        if (x.endpoint === t.endpoint && x.family === t.family && x.calls) {
          calls.calls += x.calls.calls; calls.errors += x.calls.errors; calls.output_mismatches += x.calls.output_mismatches || 0;
        }
      }
      const row = { ...t, name: t.family, tools, op: t.family, calls };
      families.set(key, row);
      rows.push(row);
    } else {
      rows.push({ ...t, op: t.name });
    }
  }
  // Entries that could not load serve no tools: one row each, with why
  // and when the gateway tries again.
  for (const f of tr.body.failed || []) {
    rows.push({ name: f.entry, op: f.entry, adapter: f.adapter, source: f.source, endpoint: f.endpoint,
      workspace: f.workspace, failed: f });
  }
  const served = new Set(((er.body && er.body.endpoints) || []).map((e) => e.catalog).filter(Boolean));
  const unserved = ((cr.body && cr.body.catalogs) || []).filter((c) => !c.deleted && !served.has(c.catalog));
  const lists = await Promise.all(unserved.map((c) => api("GET", `catalogs/${encodeURIComponent(c.catalog)}/operations`)));
  unserved.forEach((c, i) => {
    for (const op of (lists[i].body && lists[i].body.operations) || []) {
      const mode = op.mode || "unary";
      const row = { name: op.name, op: op.name, description: op.description, mode, adapter: op.adapter,
        source: { kind: "catalog", catalog: c.catalog, version: c.version }, unserved: true };
      if (mode === "session" || mode === "async_job") {
        row.tools = {};
        for (const role of familyRoles(state.opSchema, mode)) row.tools[role] = (op.family || {})[`${role}_tool_name`] || `${op.name}_${role}`;
      }
      rows.push(row);
    }
  });
  state.toolRows = rows;
  renderTools();
  // A starting replica builds its endpoints' tools one after the other:
  // until every one is built, say so and ask again.
  const loading = tr.body.loading || [];
  if (loading.length > 0) {
    say(`Still loading the tools of ${loading.length} endpoint(s) (${loading.join(", ")})…`);
    state.toolsRetry = setTimeout(() => { if (state.view === "tools") loadTools().catch((e) => say(String(e))); }, 1000);
  } else if ($("#status").textContent.startsWith("Still loading the tools") || $("#status").textContent.startsWith("the crank app has not started")) {
    say("");
  }
}

function sourceText(r) {
  const s = r.source || {};
  if (s.kind === "catalog") return `catalog ${s.catalog}${s.version ? ` v${s.version}` : ""}${r.unserved ? " (not served here)" : ""}`;
  return `file ${s.file || ""}`;
}

// callsChart is a row's bar of calls, its failed part in red, scaled to
// the busiest tool, and the answers that did not match the tool's
// published output schema (delivered as text instead), when there were.
function callsChart(c, most) {
  if (!c) return "—";
  const mism = c.output_mismatches || 0;
  const label = `${c.calls} call${c.calls === 1 ? "" : "s"}, ${c.errors} error${c.errors === 1 ? "" : "s"}` +
    (mism ? `, ${mism} output mismatch${mism === 1 ? "" : "es"}` : "");
  const w = most ? Math.max(c.calls ? 4 : 0, Math.round((100 * c.calls) / most)) : 0;
  const e = c.calls ? Math.round((w * c.errors) / c.calls) : 0;
  // Widths through the CSSOM: the page's CSP refuses style attributes.
  const ok = el("span", { class: "ok" });
  ok.style.width = `${w - e}%`;
  const err = el("span", { class: "err" });
  err.style.width = `${e}%`;
  return el("div", { class: "calls", "data-calls": c.calls, "data-errors": c.errors, "data-output-mismatches": mism,
    title: mism ? "Answers that did not match the output schema the tool publishes were delivered as text (crank_output_mismatch_total)." : "" },
    el("div", { class: "bar", "aria-hidden": "true" }, ok, err),
    el("span", { class: "count" }, label));
}

function renderTools() {
  const q = $("#tools-filter").value.trim().toLowerCase();
  const most = Math.max(0, ...(state.toolRows || []).map((r) => (r.calls ? r.calls.calls : 0)));
  const tbody = $("#tools tbody");
  tbody.replaceChildren();
  let shown = 0;
  for (const r of state.toolRows || []) {
    const famText = r.tools ? Object.entries(r.tools).map(([role, n]) => `${role}: ${n}`).join(" · ") : "";
    const hay = [r.name, r.mode, r.adapter, famText, sourceText(r), r.description, r.workspace, r.failed ? `not loaded ${r.failed.error}` : ""].join(" ").toLowerCase();
    if (q && !hay.includes(q)) continue;
    shown++;
    const fam = r.tools ? el("ul", { class: "family", "aria-label": `tools of ${r.name}` },
      ...Object.entries(r.tools).map(([role, n]) => el("li", {}, el("span", { class: "role" }, role), " ", el("code", {}, n)))) : "";
    tbody.append(el("tr", { "data-row": r.name, class: r.failed ? "failed" : "" },
      el("th", { scope: "row" }, el("button", { type: "button", "data-tool": r.name, onclick: () => openTool(r) }, r.name),
        r.description ? el("div", { class: "desc" }, r.description) : "",
        r.failed ? el("div", { class: "load-error", "data-load-error": r.name }, loadErrorText(r.failed)) : ""),
      el("td", {}, r.failed ? el("span", { class: "badge failed" }, "not loaded") : badge(r.mode)),
      el("td", {}, r.adapter || ""),
      el("td", {}, fam),
      el("td", {}, sourceText(r)),
      el("td", {}, r.endpoint !== undefined ? `#${r.endpoint} · ${r.workspace}` : "—"),
      el("td", {}, callsChart(r.calls, most))));
  }
  if (!shown) tbody.append(el("tr", {}, el("td", { colspan: "7" }, q ? "No tool matches the filter." : "No tool is served.")));
}

// loadErrorText says why an entry could not load, how often it failed
// and when the gateway tries again.
function loadErrorText(f) {
  const next = f.next_attempt ? `; next attempt ${new Date(f.next_attempt).toLocaleTimeString()}` : "";
  return `Could not load (${f.attempts} attempt${f.attempts === 1 ? "" : "s"}${next}): ${f.error}`;
}

// openTool opens a catalog tool's operation in the editor, or shows a
// file tool's details (read-only).
async function openTool(r) {
  if (r.source && r.source.kind === "catalog") {
    showView("catalogs");
    await openCatalog(r.source.catalog);
    if (state.operations.some((o) => o.name === r.op)) editOperation(r.op);
    return;
  }
  const dl = $("#tool-detail-fields");
  dl.replaceChildren();
  const row = (k, v) => dl.append(el("div", {}, el("dt", {}, k), el("dd", {}, v)));
  row("Name", r.name);
  if (r.failed) row("Load error", loadErrorText(r.failed));
  else row("Mode", badge(r.mode));
  row("Adapter", r.adapter || "");
  row("Source", sourceText(r));
  if (r.tools) row("Family", Object.entries(r.tools).map(([role, n]) => `${role}: ${n}`).join(", "));
  row("Description", r.description || "");
  $("#tool-detail-title").textContent = `Tool ${r.name}`;
  state.detail = r;
  const served = r.endpoint !== undefined && !r.failed;
  $("#call-form").hidden = !served || !!r.tools;
  $("#call-args").value = "{}";
  $("#dhand-args").value = "{}";
  for (const id of ["#call-flags", "#call-warnings", "#call-chunks"]) $(id).replaceChildren();
  $("#call-result").textContent = "";
  if (served && !r.tools) argsForm(r.input_schema, "#call-args-fields", "#call-args", "call");
  if (served && r.tools) argsForm(r.input_schema, "#dhand-args-fields", "#dhand-args", "dharg");
  renderHand("detail", served && r.tools ? { endpoint: r.endpoint, tools: r.tools, mode: r.mode } : null);
  $("#tool-detail").hidden = false;
  $("#tool-detail").scrollIntoView({ block: "nearest" });
}

// ---- catalogs ----

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

// loadOpSchema reads the operation entry's schema once: the operation
// form and the roles of tool families come from it.
async function loadOpSchema() {
  if (state.opSchema) return;
  const r = await api("GET", "schema/operation");
  if (r.status === 200 && r.body && r.body.properties) state.opSchema = r.body;
}

async function loadAdapters() {
  const r = await api("GET", "adapters");
  if (r.status === 200 && Array.isArray(r.body)) state.adapters = r.body;
}

async function openCatalog(name) {
  await loadOpSchema();
  if (name !== state.catalog) $("#history-pane").hidden = true;
  state.catalog = name;
  const r = await api("GET", "catalogs/" + encodeURIComponent(name));
  $("#ops-pane").hidden = false;
  $("#ops-title").textContent = `Operations of ${name}`;
  if (r.status === 404) {
    state.etag = "";
    state.operations = [];
    state.limits = [];
    $("#catalog-version").textContent = "A new catalog: saving an operation creates it.";
  } else if (r.status !== 200) {
    say(r.body.error || `catalog ${name}: ${r.status}`);
    return;
  } else {
    state.etag = r.etag;
    state.operations = r.body.operations || [];
    state.limits = r.body.rate_limits || [];
    const h = r.body.catalog;
    $("#catalog-version").textContent = `Version ${h.version}, by ${h.author}${h.deleted ? " (deleted)" : ""}`;
  }
  renderOperations();
  renderLimits();
  await loadCatalogs();
}

// ---- a catalog's rate limits ----

// limitScope says what a limit limits, as the schema's scope fields do.
function limitScope(l) {
  for (const k of ["tool", "family", "toolset", "upstream"]) if (l[k]) return `${k} ${l[k]}`;
  return "every tool";
}

function renderLimits() {
  const tbody = $("#catalog-limits tbody");
  tbody.replaceChildren();
  state.limits.forEach((l, i) => tbody.append(el("tr", { "data-limit": l.name },
    el("th", { scope: "row" }, l.name),
    el("td", {}, l.rate || ""),
    el("td", {}, l.burst === undefined ? "default" : String(l.burst)),
    el("td", {}, l.per || "everyone"),
    el("td", {}, limitScope(l)),
    el("td", {}, l.fleet ? "yes" : "no"),
    el("td", {},
      el("button", { type: "button", "data-edit-limit": l.name, onclick: () => editLimit(i) }, "Edit"),
      el("button", { type: "button", "data-remove-limit": l.name, onclick: () => saveLimits(state.limits.filter((_, j) => j !== i), `removed ${l.name}`) }, "Remove")))));
  if (!state.limits.length) tbody.append(el("tr", {}, el("td", { colspan: "7" }, "None: only the handlers' limits apply.")));
}

// editLimit opens the rate limit form (from the limit's schema) on the
// limit at index i, or on a new one.
async function editLimit(i) {
  if (!state.limitSchema) {
    const r = await api("GET", "schema/rate_limit");
    if (r.status !== 200) { say(r.body.error || `schema: ${r.status}`); return; }
    state.limitSchema = r.body;
  }
  state.editingLimit = i;
  const limit = structuredClone(state.limits[i] || {});
  $("#limit-legend").textContent = i < state.limits.length ? `Rate limit ${limit.name}` : "New rate limit";
  const box = $("#limit-form");
  box.replaceChildren();
  for (const f of schemaFields(state.limitSchema, [], "rl")) box.append(renderField(f, limit, () => {}));
  $("#limit-problems").replaceChildren();
  $("#limit-editor").hidden = false;
  $("#rl-name").focus();
}

// saveLimits replaces the catalog's rate limits with limits, as a new
// version; problems are placed beside the form's fields.
async function saveLimits(limits, what) {
  const r = await api("PUT", `catalogs/${encodeURIComponent(state.catalog)}/rate_limits?message=${encodeURIComponent(what)}`, limits,
    { "If-Match": state.etag || "*" });
  const box = $("#limit-problems");
  box.replaceChildren();
  for (const e of document.querySelectorAll("#limit-form .field-error")) e.textContent = "";
  if (r.status !== 200) {
    box.append(el("p", { class: "problem" }, r.body.error || `rate limits: ${r.status}`));
    for (const p of r.body.errors || []) {
      const field = (p.pointer || "").split("/")[2];
      const err = field && document.getElementById(`rl-${field}-err`);
      if (err) err.textContent = p.message; else box.append(el("p", { class: "problem" }, `${p.pointer}: ${p.message}`));
    }
    return false;
  }
  state.etag = r.etag;
  say(`${state.catalog}: ${what}, now version ${r.body.catalog.version}`);
  await openCatalog(state.catalog);
  return true;
}

async function saveLimit(ev) {
  ev.preventDefault();
  const limit = {};
  for (const input of document.querySelectorAll("#limit-form [data-path]")) readField(input, limit);
  const limits = state.limits.slice();
  limits[state.editingLimit] = limit;
  if (await saveLimits(limits, `rate limit ${limit.name || ""} saved`)) $("#limit-editor").hidden = true;
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
      el("td", {}, badge(mode)),
      el("td", {}, op.adapter || ""),
      el("td", {}, op.description || "")));
  }
}

// ---- the operation form ----

function adapterSchema(name) {
  const a = state.adapters.find((x) => x.name === name);
  return a && a.config_schema && typeof a.config_schema === "object" ? a.config_schema : null;
}

// renderForm builds the form of state.entry from the operation schema:
// its fields, the adapter config from the adapter's schema (or as JSON)
// after them, then its blocks (Collection limits, Aggregation, Safety,
// Tool family, ...) and the schemas.
function renderForm() {
  const box = $("#op-form");
  box.replaceChildren();
  const entry = state.entry;
  for (const block of opFields(state.opSchema)) {
    const fs = el("fieldset", { id: `block-${block.id}`, "data-modes": block.modes ? block.modes.join(" ") : "" },
      el("legend", {}, block.legend));
    if (block.note) fs.append(el("p", { class: "note" }, block.note));
    const grid = el("div", { class: "fields-grid" });
    for (const f of block.fields) grid.append(renderField(f, entry, onFormInput));
    fs.append(grid);
    box.append(fs);
    if (block.id === "basics") box.append(configBlock());
  }
  applyModeVisibility();
  renderArgsForm();
}

// configBlock is the adapter config's fieldset: fields from the adapter's
// schema, or the config as JSON. Without a schema it is aria-busy and the
// page asks again (awaitSchema): it may have loaded before the crank app
// started the adapters, or no handler uses the adapter yet.
function configBlock() {
  const entry = state.entry;
  const schema = adapterSchema(entry.adapter);
  const fs = el("fieldset", { id: "block-config", "aria-busy": String(!schema && !!entry.adapter) },
    el("legend", {}, `Adapter config${entry.adapter ? ` (${entry.adapter})` : ""}`));
  const raw = state.configRaw || !schema;
  const toggle = el("button", { type: "button", id: "config-toggle", onclick: () => {
    state.entry = readForm();
    state.configRaw = !raw;
    renderForm();
  } }, raw ? "Edit as a form" : "Edit as JSON");
  if (!schema) {
    toggle.disabled = true;
    fs.append(el("p", { class: "note" }, `The adapter ${entry.adapter || "(none)"} has not published its config schema here yet (it does once the gateway runs it for a handler): edit the config as JSON; the form follows when it has.`));
    if (entry.adapter) awaitSchema();
  }
  fs.append(el("div", { class: "buttons" }, toggle));
  if (raw) {
    fs.append(renderField({ path: ["config"], label: "Config (JSON object)", type: "json", rows: 8 }, entry, onFormInput));
  } else {
    const grid = el("div", { class: "fields-grid" });
    for (const f of schemaFields(schema, ["config"])) grid.append(renderField(f, entry, onFormInput));
    fs.append(grid);
  }
  return fs;
}

// awaitSchema asks for the adapters again each second while the editor
// shows an adapter without a config schema; once it has one, the config
// block shows its fields, keeping the draft. While the config's JSON has
// the focus or does not parse, only the toggle to the form is offered.
function awaitSchema() {
  clearTimeout(state.schemaRetry);
  state.schemaRetry = setTimeout(async () => {
    const name = state.entry.adapter;
    if ($("#editor-pane").hidden || !name || adapterSchema(name)) return;
    await loadAdapters().catch(() => {});
    const block = $("#block-config");
    if ($("#editor-pane").hidden || !block || state.entry.adapter !== name) return;
    if (!adapterSchema(name)) { awaitSchema(); return; }
    state.entry = readForm();
    const c = state.entry.config;
    if (block.contains(document.activeElement) || (c !== undefined && (c === null || typeof c !== "object" || Array.isArray(c)))) {
      block.setAttribute("aria-busy", "false");
      const toggle = $("#config-toggle");
      toggle.disabled = false;
      block.querySelector(".note").textContent = `The adapter ${name} has published its config schema: Edit as a form shows its fields.`;
      return;
    }
    block.replaceWith(configBlock());
  }, 1000);
}

// applyModeVisibility shows the blocks and fields of the form's mode
// only (the schema's x-crank-modes).
function applyModeVisibility() {
  const mode = ($("#f-mode") && $("#f-mode").value) || "unary";
  for (const e of document.querySelectorAll("#op-form [data-modes]")) {
    const modes = e.dataset.modes;
    if (modes) e.hidden = !modes.split(" ").includes(mode);
  }
}

// readForm is the entry the form describes: the loaded entry with the
// form's fields set (an emptied field removed).
function readForm() {
  const out = structuredClone(state.entry);
  for (const input of document.querySelectorAll("#op-form [data-path]")) readField(input, out);
  return out;
}

function onFormInput(ev) {
  const adapterChanged = ev && ev.target && ev.target.id === "f-adapter";
  state.entry = readForm();
  $("#entry").value = JSON.stringify(state.entry, null, 2);
  if (ev && ev.target && ev.target.id === "f-mode") applyModeVisibility();
  if (adapterChanged && ev.type === "change") renderForm();
  if (ev && ev.target && ev.target.dataset.path === "input_schema") renderArgsForm();
}

function loadEntry(obj) {
  state.entry = obj;
  state.configRaw = false;
  $("#entry").value = JSON.stringify(obj, null, 2);
  renderForm();
}

function editOperation(name) {
  const op = state.operations.find((o) => o.name === name);
  state.editing = name;
  $("#editor-title").textContent = `Operation ${name}`;
  if (name !== state.argsFor) $("#test-args").value = "{}";
  state.argsFor = name;
  loadEntry(structuredClone(op));
  showProblems(null);
  clearTest();
  $("#editor-pane").hidden = false;
  renderHandCall();
  $("#f-name").focus();
  checkQuietly();
}

function newOperation() {
  state.editing = "";
  $("#editor-title").textContent = "New operation";
  $("#test-args").value = "{}";
  state.argsFor = "";
  loadEntry({ name: "", description: "", adapter: "rest", config: { method: "GET", url: "https://api.example.com/items/{id}" } });
  showProblems(null);
  clearTest();
  $("#editor-pane").hidden = false;
  renderHandCall();
  $("#f-name").focus();
}

// checkQuietly validates the entry to show its effective values; the
// editor is aria-busy until they are shown (the form's layout settles).
async function checkQuietly() {
  const pane = $("#editor-pane");
  state.checking = (state.checking || 0) + 1;
  pane.setAttribute("aria-busy", "true");
  try {
    const r = await api("POST", `${entryPath()}/validate?${validateQuery()}`, $("#entry").value);
    if (r.status === 200) showEffective(r.body.effective);
  } finally {
    if (--state.checking === 0) pane.setAttribute("aria-busy", "false");
  }
}

// showEffective writes each limit's and setting's effective value beside
// its field, marking those the entry leaves to the default.
function showEffective(eff) {
  for (const span of document.querySelectorAll("#op-form [data-effective]")) {
    const path = span.dataset.effective.split("/").filter(Boolean);
    let v;
    if (eff) {
      if (path[0] === "timeout") v = eff.timeout_ms !== undefined ? `${eff.timeout_ms} ms` : undefined;
      else if (eff.execution) {
        const blk = { limits: eff.execution.limits, aggregation: eff.execution.aggregation, safety: eff.execution.safety }[path[0]];
        v = blk ? blk[path[1]] : undefined;
        if (path[0] === "transport_behavior") v = eff.execution.transport_behavior;
      }
    }
    const input = document.getElementById(span.dataset.for);
    const set = input && input.value !== "";
    if (v === undefined || v === null || v === "") { span.textContent = eff ? "" : ""; continue; }
    const shown = Array.isArray(v) ? (v.join(", ") || "none") : String(v);
    span.textContent = set ? `effective: ${shown}` : `effective: ${shown} (default)`;
    span.classList.toggle("default", !set);
  }
}

function clearFieldErrors() {
  for (const p of document.querySelectorAll("#op-form .field-error")) p.textContent = "";
  for (const i of document.querySelectorAll("#op-form [aria-invalid]")) i.removeAttribute("aria-invalid");
}

// showProblems lists an answer's errors and warnings, each with the JSON
// pointer and line it concerns, and places each beside its field.
function showProblems(body, okText) {
  const box = $("#problems");
  box.replaceChildren();
  clearFieldErrors();
  if (!body) return;
  const line = (p, cls) => el("p", { class: cls, "data-pointer": p.pointer || "" },
    p.pointer ? el("span", { class: "pointer" }, p.pointer) : "",
    p.pointer ? ": " : "", p.message, p.line ? ` (line ${p.line})` : "");
  for (const p of body.errors || []) { box.append(line(p, "problem")); fieldError(p, "problem"); }
  for (const p of body.warnings || []) { box.append(line(p, "warning")); fieldError(p, "warning"); }
  if (body.error && !(body.errors || []).length) box.append(el("p", { class: "problem" }, body.error));
  if (okText) box.append(el("p", { class: "ok" }, okText));
}

function entryPath() {
  return "catalogs/" + encodeURIComponent(state.catalog);
}

function validateQuery() {
  return state.editing ? `operation=${encodeURIComponent(state.editing)}` : "entry=true";
}

async function validate() {
  const r = await api("POST", `${entryPath()}/validate?${validateQuery()}`, $("#entry").value);
  if (r.status !== 200) { showProblems(r.body); return; }
  showProblems(r.body, r.body.valid ? "Valid: saving would load." : "");
  showEffective(r.body.effective);
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

function entryToForm() {
  let obj;
  try { obj = JSON.parse($("#entry").value); } catch {
    say("The raw entry is not JSON (YAML cannot be shown in the form; Validate and Save take it as it is).");
    return;
  }
  loadEntry(obj);
  say("The form shows the raw entry.");
}

// ---- history ----

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

// ---- test run ----

// renderArgsForm builds the arguments form from the entry's input schema.
function renderArgsForm() {
  argsForm(state.entry.input_schema, "#test-args-fields", "#test-args", "arg");
}

// argsForm builds, in box, the fields of an input schema's properties,
// kept in sync with the JSON arguments in the textarea json.
function argsForm(schema, box, json, prefix) {
  const fieldsBox = $(box);
  fieldsBox.replaceChildren();
  if (typeof schema === "string") { try { schema = JSON.parse(schema); } catch { schema = null; } }
  const fields = schema && typeof schema === "object" ? schemaFields(schema, [], prefix) : [];
  if (!fields.length) {
    fieldsBox.append(el("p", { class: "note" }, "The input schema declares no arguments; add any as JSON below."));
    return;
  }
  let current = {};
  try { current = JSON.parse($(json).value || "{}"); } catch { current = {}; }
  const onInput = () => {
    let args = {};
    try { args = JSON.parse($(json).value || "{}"); } catch { args = {}; }
    for (const input of fieldsBox.querySelectorAll("[data-path]")) readField(input, args);
    $(json).value = JSON.stringify(args);
  };
  for (const f of fields) fieldsBox.append(renderField(f, current, onInput));
}

function clearTest() {
  $("#test-flags").replaceChildren();
  $("#test-warnings").replaceChildren();
  $("#test-chunks").replaceChildren();
  $("#test-result").textContent = "";
}

function showFlags(t, flags) {
  flags.replaceChildren();
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
  let stats = null;
  try { stats = t.result && t.result.stats; } catch { stats = null; }
  if (stats) {
    for (const k of ["received", "returned", "fields_truncated", "skipped_oversize", "redacted", "bytes"]) {
      if (stats[k] !== undefined) flag(`stats.${k}`, stats[k], (k === "fields_truncated" || k === "skipped_oversize" || k === "redacted") && stats[k] > 0);
    }
  }
}

// runTest runs the editor's draft (or, for YAML, the saved operation of
// its name), showing a window's chunks as they arrive, then what a client
// would get: the flags, warnings and result.
async function runTest(ev) {
  ev.preventDefault();
  let args;
  try { args = JSON.parse($("#test-args").value || "{}"); } catch (e) {
    say(`Arguments: not JSON (${e.message})`);
    return;
  }
  const req = { arguments: args };
  try { req.entry = JSON.parse($("#entry").value); } catch { req.operation = state.editing; }
  clearTest();
  $("#run-test").disabled = true;
  $("#test-result").textContent = "Running…";
  const chunks = $("#test-chunks");
  let r;
  try {
    r = await apiStream(`${entryPath()}/test?stream=true`, req, (ev) => {
      if (ev.progress !== undefined) {
        chunks.append(el("li", {}, ev.progress));
        chunks.scrollTop = chunks.scrollHeight;
      }
    });
  } finally {
    $("#run-test").disabled = false;
  }
  if (r.status !== 200) {
    $("#test-result").textContent = "";
    showProblems(r.body);
    say("Test not run");
    return;
  }
  const t = r.body;
  showFlags(t, $("#test-flags"));
  for (const w of t.warnings || []) $("#test-warnings").append(el("li", {}, w));
  $("#test-result").textContent = t.text || JSON.stringify(t.result, null, 2) || "";
  say(t.is_error ? "Test run: the call failed" : "Test run done");
}

// ---- a session or job by hand ----

// HANDS are the two places sessions and jobs are driven by hand: the
// editor (a catalog operation) and a file tool's details.
const HANDS = {
  editor: { sec: "#handcall", title: "#handcall-title", buttons: "#handcall-buttons", state: "#handcall-state",
    result: "#handcall-result", btn: "hand", args: "#test-args", attr: "data-hand" },
  detail: { sec: "#dhand", title: "#dhand-title", buttons: "#dhand-buttons", state: "#dhand-state",
    result: "#dhand-result", btn: "dhand", args: "#dhand-args", attr: "data-dhand" },
};

// servedFamily is the served family of the operation in the editor.
function servedFamily() {
  const t = state.tools.find((x) => x.family === state.editing && x.source && x.source.kind === "catalog" && x.source.catalog === state.catalog);
  return t ? { endpoint: t.endpoint, tools: t.family_tools, mode: t.mode } : null;
}

function renderHandCall() {
  renderHand("editor", state.editing ? servedFamily() : null);
}

function renderHand(where, fam) {
  const h = HANDS[where];
  const sec = $(h.sec);
  sec.hidden = !fam;
  if (!fam) return;
  state.hands = state.hands || {};
  state.hands[where] = { id: "", cursor: "" };
  const job = fam.mode === "async_job";
  $(h.title).textContent = job ? "Job by hand" : "Session by hand";
  const btns = $(h.buttons);
  btns.replaceChildren();
  const roles = job ? ["start", "status", "result", "cancel"] : ["start", "poll", "stop"];
  const labels = { start: job ? "Start job" : "Start session", poll: "Poll", stop: "Stop", status: "Status", result: "Result", cancel: "Cancel job" };
  for (const role of roles) {
    btns.append(el("button", { type: "button", id: `${h.btn}-${role}`, "data-role": role, disabled: role !== "start",
      onclick: () => handCall(where, fam, role) }, labels[role]));
  }
  $(h.state).replaceChildren();
  $(h.result).textContent = "";
}

async function handCall(where, fam, role) {
  const h = HANDS[where];
  const hand = state.hands[where];
  const job = fam.mode === "async_job";
  const idKey = job ? "job_id" : "session_id";
  let args = {};
  if (role === "start") {
    try { args = JSON.parse($(h.args).value || "{}"); } catch { say("Arguments: not JSON"); return; }
  } else {
    args[idKey] = hand.id;
    if (role === "poll" && hand.cursor) args.cursor = hand.cursor;
  }
  const r = await api("POST", `tools/${encodeURIComponent(fam.tools[role])}/call`, { endpoint: fam.endpoint, arguments: args });
  if (r.status !== 200) { $(h.result).textContent = r.body.error || `call: ${r.status}`; return; }
  const t = r.body;
  const res = t.result || {};
  if (role === "start" && res[idKey]) hand.id = res[idKey];
  if (res.cursor) hand.cursor = res.cursor;
  const dl = $(h.state);
  dl.replaceChildren();
  const row = (k, v) => dl.append(el("div", {}, el("dt", {}, k), el("dd", { [h.attr]: k }, String(v))));
  row(idKey, hand.id || "—");
  row("status", res.status || t.status || (t.is_error ? "error" : "—"));
  if (!job) {
    row("cursor", hand.cursor || "—");
    if (res.items) row("items", res.items.length);
    if (res.buffered_items !== undefined) row("buffered_items", res.buffered_items);
  } else if (res.progress !== undefined) {
    row("progress", typeof res.progress === "object" ? JSON.stringify(res.progress) : res.progress);
  }
  $(h.result).textContent = t.text || JSON.stringify(res, null, 2);
  const open = !!hand.id && !["stop", "cancel"].includes(role) && !["stopped", "completed", "succeeded", "failed", "canceled"].includes(res.status);
  for (const b of $(h.buttons).querySelectorAll("button")) {
    b.disabled = b.dataset.role === "start" ? open : !hand.id;
  }
  say(`${fam.tools[role]}: ${t.is_error ? "failed" : "done"}`);
}

// runCall calls the file tool in the details, showing a window's chunks
// as they arrive, then its flags, warnings and result.
async function runCall(ev) {
  ev.preventDefault();
  const r0 = state.detail;
  if (!r0) return;
  let args;
  try { args = JSON.parse($("#call-args").value || "{}"); } catch (e) { say(`Arguments: not JSON (${e.message})`); return; }
  $("#call-flags").replaceChildren();
  $("#call-warnings").replaceChildren();
  $("#call-chunks").replaceChildren();
  $("#call-result").textContent = "Calling…";
  $("#call-run").disabled = true;
  const chunks = $("#call-chunks");
  let r;
  try {
    r = await apiStream(`tools/${encodeURIComponent(r0.name)}/call?stream=true`, { endpoint: r0.endpoint, arguments: args }, (ev2) => {
      if (ev2.progress !== undefined) {
        chunks.append(el("li", {}, ev2.progress));
        chunks.scrollTop = chunks.scrollHeight;
      }
    });
  } finally {
    $("#call-run").disabled = false;
  }
  if (r.status !== 200) { $("#call-result").textContent = r.body.error || `call: ${r.status}`; say("Not called"); return; }
  const t = r.body;
  showFlags(t, $("#call-flags"));
  for (const w of t.warnings || []) $("#call-warnings").append(el("li", {}, w));
  $("#call-result").textContent = t.text || JSON.stringify(t.result, null, 2) || "";
  say(t.is_error ? `${r0.name}: the call failed` : `${r0.name}: called`);
}

// ---- live ----

const LIVE_KINDS = [
  { kind: "mcp-sessions", title: "MCP sessions", action: "End" },
  { kind: "sessions", title: "Stream sessions", action: "Stop" },
  { kind: "jobs", title: "Jobs", action: "Cancel" },
];

function age(ms) {
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

async function loadLive() {
  $("#view-live").setAttribute("aria-busy", "true");
  try { await loadLiveNow(); } finally { $("#view-live").setAttribute("aria-busy", "false"); }
}

async function loadLiveNow() {
  await loadAdapters();
  const tbody = $("#adapters tbody");
  tbody.replaceChildren();
  for (const a of state.adapters) {
    tbody.append(el("tr", { "data-adapter": a.name },
      el("th", { scope: "row" }, a.name),
      el("td", {}, a.pid ? String(a.pid) : "—"),
      el("td", {}, el("span", { class: `health ${a.health}`, title: a.last_error || "" }, a.health + (a.last_error ? `: ${a.last_error}` : ""))),
      el("td", {}, String(a.starts)),
      el("td", {}, String(a.restarts)),
      el("td", {}, a.version || ""),
      el("td", {}, (a.modes || []).join(", "))));
  }
  if (!state.adapters.length) tbody.append(el("tr", {}, el("td", { colspan: "7" }, "No adapter process.")));
  await loadLiveLimits();
  const ws = $("#live-workspace").value.trim() || "default";
  const box = $("#live-tables");
  box.replaceChildren();
  const lists = await Promise.all(LIVE_KINDS.map((k) => api("GET", `live/${encodeURIComponent(ws)}/${k.kind}?limit=500`)));
  LIVE_KINDS.forEach((k, i) => {
    const r = lists[i];
    const id = `live-${k.kind}`;
    box.append(el("h3", { id: `${id}-title` }, k.title));
    if (r.status !== 200) { box.append(el("p", { class: "problem" }, r.body.error || `${k.title}: ${r.status}`)); return; }
    const rows = (r.body.entries || []).map((e) => el("tr", { "data-live": e.id },
      el("th", { scope: "row" }, el("code", {}, e.id)),
      el("td", {}, e.operation || e.client || ""),
      el("td", {}, e.agent || ""),
      el("td", {}, e.status || ""),
      el("td", {}, e.owner_replica || ""),
      el("td", {}, age(e.age_ms || 0)),
      el("td", {}, el("button", { type: "button", "data-stop": `${k.kind}/${e.id}`, "aria-label": `${k.action} ${e.id}`,
        onclick: () => stopLive(ws, k, e.id) }, k.action))));
    if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: "7" }, "None.")));
    box.append(el("div", { class: "scroll" }, el("table", { id, "aria-labelledby": `${id}-title` },
      // An MCP session's id is the digest of its Mcp-Session-Id (the ID is
      // its client's credential and never listed).
      el("thead", {}, el("tr", {}, ...[k.kind === "mcp-sessions" ? "Digest" : "Id", k.kind === "mcp-sessions" ? "Client" : "Operation", "Agent", "Status", "Owner replica", "Age", "Action"]
        .map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, ...rows))));
  });
  await loadGrants();
}

// loadGrants shows each endpoint's authorization_code upstreams: how many
// users connected each, and the console user's own grants, to revoke.
async function loadGrants() {
  const box = $("#grants");
  box.replaceChildren();
  const r = await api("GET", "upstream-grants");
  if (r.status !== 200) { box.append(el("p", { class: "problem" }, r.body.error || `Connected upstreams: ${r.status}`)); return; }
  if (!r.body.endpoints.length) { box.append(el("p", {}, "No endpoint has an upstream its users connect to.")); return; }
  for (const e of r.body.endpoints) {
    const mine = new Map((e.mine || []).map((g) => [g.upstream, g]));
    const rows = e.upstreams.map((u) => {
      const g = mine.get(u.upstream);
      return el("tr", { "data-upstream": u.upstream },
        el("th", { scope: "row" }, u.upstream),
        el("td", {}, e.workspace),
        el("td", {}, String(u.users)),
        el("td", {}, g ? `connected (${g.scope || "no scope"}) since ${new Date(g.granted).toLocaleString()}` : (r.body.user ? "not connected" : "—")),
        el("td", {}, g ? el("button", { type: "button", "data-revoke": u.upstream, "aria-label": `Revoke ${u.upstream}`,
          onclick: () => revokeGrant(e.workspace, u.upstream) }, "Revoke") : ""));
    });
    box.append(el("div", { class: "scroll" }, el("table", { "aria-labelledby": "grants-title" },
      el("thead", {}, el("tr", {}, ...["Upstream", "Workspace", "Users connected", "You", "Action"].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, ...rows))));
  }
}

async function revokeGrant(ws, upstream) {
  const r = await api("DELETE", `upstream-grants/${encodeURIComponent(ws)}/${encodeURIComponent(upstream)}`);
  if (r.status !== 200) { say(r.body.error || `Revoke: ${r.status}`); return; }
  say(`${upstream}: ${r.body.revoked ? "revoked" : "was not connected"}${r.body.provider ? ` (provider: ${r.body.provider})` : ""}`);
  await loadGrants();
}

// loadLiveLimits shows this replica's rate limits: what each allows, how
// many replicas enforce it and this one's share, and the calls it
// admitted and refused here.
async function loadLiveLimits() {
  const r = await api("GET", "rate-limits");
  const tbody = $("#rate-limits tbody");
  tbody.replaceChildren();
  if (r.status !== 200) { tbody.append(el("tr", {}, el("td", { colspan: "7" }, r.body.error || `rate limits: ${r.status}`))); return; }
  for (const l of r.body.limits || []) {
    tbody.append(el("tr", { "data-rate-limit": l.name },
      el("th", { scope: "row" }, l.name),
      el("td", {}, l.scope),
      el("td", {}, l.allows),
      el("td", {}, `${l.members} (${Math.round(l.share * 100)}%)`),
      el("td", {}, String(l.admitted)),
      el("td", { "data-refused": String(l.refused) }, String(l.refused)),
      el("td", {}, String(l.keys))));
  }
  if (!(r.body.limits || []).length) tbody.append(el("tr", {}, el("td", { colspan: "7" }, "No rate limit.")));
}

async function stopLive(ws, k, id) {
  const r = await api("DELETE", `live/${encodeURIComponent(ws)}/${k.kind}/${encodeURIComponent(id)}`);
  if (r.status !== 200) { say(r.body.error || `${k.action}: ${r.status}`); return; }
  say(`${k.title}: ${id} ${r.body.status || "stopped"}`);
  await loadLive();
}

// ---- start ----

function init() {
  for (const b of document.querySelectorAll("header nav button[data-view]")) {
    b.addEventListener("click", () => showView(b.dataset.view));
  }
  $("#tools-filter").addEventListener("input", renderTools);
  $("#tools-refresh").addEventListener("click", () => loadTools().catch((e) => say(String(e))));
  $("#new-catalog").addEventListener("submit", (ev) => {
    ev.preventDefault();
    openCatalog($("#new-catalog-name").value.trim());
  });
  $("#ops-filter").addEventListener("input", renderOperations);
  $("#new-op").addEventListener("click", newOperation);
  $("#validate").addEventListener("click", validate);
  $("#editor").addEventListener("submit", save);
  $("#entry-to-form").addEventListener("click", entryToForm);
  $("#show-history").addEventListener("click", showHistory);
  $("#test-form").addEventListener("submit", runTest);
  $("#close").addEventListener("click", () => { $("#editor-pane").hidden = true; state.editing = null; });
  $("#call-form").addEventListener("submit", runCall);
  $("#live-refresh").addEventListener("click", () => loadLive().catch((e) => say(String(e))));
  $("#new-limit").addEventListener("click", () => editLimit(state.limits.length));
  $("#limit-editor").addEventListener("submit", saveLimit);
  $("#close-limit").addEventListener("click", () => { $("#limit-editor").hidden = true; });
  loadAdapters().catch(() => {});
  showView("tools");
}

init();
