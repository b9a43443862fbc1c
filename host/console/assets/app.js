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
  const headers = { "X-Crank-Operator": "console" };
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

function init() {
  $("#new-catalog").addEventListener("submit", (ev) => {
    ev.preventDefault();
    openCatalog($("#new-catalog-name").value.trim());
  });
  $("#ops-filter").addEventListener("input", renderOperations);
  $("#new-op").addEventListener("click", newOperation);
  $("#validate").addEventListener("click", validate);
  $("#editor").addEventListener("submit", save);
  $("#close").addEventListener("click", () => { $("#editor-pane").hidden = true; state.editing = null; });
  loadCatalogs().catch((e) => say(String(e)));
}

init();
