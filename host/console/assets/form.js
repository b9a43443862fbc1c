// Forms of the console: the operation form's blocks (the plan's Execution
// mode, Collection limits, Aggregation, Safety and Tool family), fields
// generated from a JSON Schema (an adapter's config, a tool's input), and
// the placing of the admin API's problems beside their fields.

export const FAMILY_ROLES = {
  session: ["start", "poll", "stop"],
  async_job: ["start", "status", "result", "cancel"],
};

const WINDOWED = ["window", "session", "async_job"];

const text = (path, label, more = {}) => ({ path, label, type: "text", ...more });
const num = (path, label, more = {}) => ({ path, label, type: "number", effective: true, ...more });

// opFields are the blocks of the operation form, in order; the adapter
// config block follows "mode".
export function opFields() {
  return [
    { id: "basics", legend: "Operation", fields: [
      text(["name"], "Name (the MCP tool name)", { required: true, hint: "1–128 characters of A-Z a-z 0-9 _ . -" }),
      text(["title"], "Title"),
      { path: ["description"], label: "Description", type: "textarea", rows: 2, required: true },
      text(["adapter"], "Adapter", { required: true, hint: "rest, graphql, grpc, soap, websocket, or one an operations file declares" }),
      text(["timeout"], "Timeout", { hint: "a duration such as 5s", effective: true }),
      { path: ["scope"], label: "Scope of its sessions and jobs", type: "select", options: [["", "default (agent)"], ["agent", "agent"], ["workspace", "workspace"]] },
    ] },
    { id: "mode", legend: "Execution mode", fields: [
      { path: ["mode"], label: "Mode", type: "select", options: [["", "unary (default)"], ["unary", "unary"], ["window", "window"], ["session", "session"], ["async_job", "async_job"]] },
      { path: ["transport_behavior"], label: "Transport behaviour", type: "select", effective: true,
        options: [["", "default"], ["server_stream", "server_stream"], ["request_response", "request_response"]] },
      text(["preset"], "Preset", { hint: "e.g. openai_chat: defaults for a kind of upstream" }),
    ] },
    { id: "limits", legend: "Collection limits", modes: WINDOWED,
      note: "Every limit applies: a field left empty takes the default, marked as such once the entry is checked.", fields: [
        num(["limits", "window_duration_ms"], "Window duration (ms)", { min: 1 }),
        num(["limits", "poll_interval_ms"], "Poll interval (ms)", { min: 10 }),
        num(["limits", "upstream_timeout_ms"], "Upstream timeout (ms)", { min: 1 }),
        num(["limits", "idle_timeout_ms"], "Session idle timeout (ms)", { min: 1 }),
        num(["limits", "max_session_lifetime_ms"], "Session lifetime (ms)", { min: 1 }),
        num(["limits", "max_items"], "Max items", { min: 1 }),
        num(["limits", "max_bytes"], "Max bytes", { min: 1 }),
      ] },
    { id: "aggregation", legend: "Aggregation", modes: WINDOWED, fields: [
      { path: ["aggregation", "aggregation_mode"], label: "Aggregation mode", type: "select", effective: true,
        options: [["", "default"], ...["raw_items", "summary_only", "summary_plus_samples", "stats", "latest_state", "text"].map((m) => [m, m])] },
      ...["items_path", "summary_path", "cursor_path", "status_path", "done_path", "group_by"].map((k) => text(["aggregation", k], k.replaceAll("_", " "), { hint: "JSONPath, e.g. $.items[*]", mono: true })),
      num(["aggregation", "sample_size"], "Sample size", { min: 1 }),
      ...["value_path", "key_path", "text_path", "finish_reason_path", "usage_path"].map((k) => text(["aggregation", k], k.replaceAll("_", " "), { mono: true })),
    ] },
    { id: "safety", legend: "Safety", modes: WINDOWED, fields: [
      { path: ["safety", "redacted_paths"], label: "Redacted paths (one JSONPath a line)", type: "lines", effective: true, rows: 2 },
      { path: ["safety", "truncate_item_fields"], label: "Truncate long item fields", type: "bool", effective: true },
      num(["safety", "max_field_length"], "Max field length", { min: 16 }),
      { path: ["safety", "drop_duplicates"], label: "Drop duplicate items", type: "bool", effective: true },
      num(["safety", "sampling_rate"], "Sampling rate (0–1]", { step: "any", min: 0, max: 1 }),
    ] },
    { id: "family", legend: "Tool family", modes: ["session", "async_job"],
      note: "The tools a session (start/poll/stop) or job (start/status/result/cancel) is published as; empty: {name}_{role}.",
      fields: ["start", "poll", "stop", "status", "result", "cancel"].map((role) =>
        text(["family", `${role}_tool_name`], `${role} tool`, { placeholder: (e) => `${e.name || "{name}"}_${role}` })) },
    { id: "schemas", legend: "Schemas", fields: [
      { path: ["input_schema"], label: "Input schema (JSON Schema of the arguments)", type: "json", rows: 6 },
      { path: ["output_schema"], label: "Output schema (JSON Schema of structuredContent)", type: "json", rows: 4 },
    ] },
  ];
}

// schemaFields are the fields of a JSON Schema's properties, under base.
export function schemaFields(schema, base, prefix) {
  const props = (schema && schema.properties) || {};
  const required = new Set((schema && schema.required) || []);
  const out = [];
  for (const [name, p] of Object.entries(props)) {
    let type = Array.isArray(p.type) ? p.type.find((t) => t !== "null") : p.type;
    const f = { path: [...base, name], label: p.title ? `${p.title} (${name})` : name, hint: p.description || "",
      required: required.has(name), prefix };
    if (p.default !== undefined) f.placeholder = `default: ${typeof p.default === "string" ? p.default : JSON.stringify(p.default)}`;
    if (Array.isArray(p.enum)) {
      f.type = "select";
      f.options = [["", required.has(name) ? "choose…" : "default"], ...p.enum.map((v) => [String(v), String(v)])];
      f.enumTypes = type;
    } else if (type === "string") f.type = "text";
    else if (type === "integer" || type === "number") { f.type = "number"; f.step = type === "integer" ? "1" : "any"; }
    else if (type === "boolean") f.type = "bool";
    else if (type === "array" && p.items && p.items.type === "string") f.type = "lines";
    else { f.type = "json"; f.rows = 2; }
    out.push(f);
  }
  return out;
}

function get(obj, path) {
  let v = obj;
  for (const k of path) {
    if (v === null || typeof v !== "object") return undefined;
    v = v[k];
  }
  return v;
}

// setField sets (or, for undefined, removes) path in obj, removing the
// objects a removal leaves empty.
export function setField(obj, path, value) {
  const parents = [];
  let o = obj;
  for (const k of path.slice(0, -1)) {
    if (o[k] === null || typeof o[k] !== "object" || Array.isArray(o[k])) {
      if (value === undefined) return;
      o[k] = {};
    }
    parents.push([o, k]);
    o = o[k];
  }
  const last = path[path.length - 1];
  if (value === undefined) {
    delete o[last];
    for (let i = parents.length - 1; i >= 0; i--) {
      const [p, k] = parents[i];
      if (Object.keys(p[k]).length === 0) delete p[k]; else break;
    }
  } else {
    o[last] = value;
  }
}

const esc = (k) => String(k).replaceAll("~", "~0").replaceAll("/", "~1");

function node(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v; else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) if (c !== undefined && c !== null && c !== "") e.append(c);
  return e;
}

// renderField renders one labelled field of obj: its input, a hint, the
// effective value and a place for its problem.
export function renderField(f, obj, onInput) {
  const prefix = f.prefix || "f";
  const id = `${prefix}-${f.path.join("-")}`;
  const v = get(obj, f.path);
  const pointer = "/" + f.path.map(esc).join("/");
  const described = [];
  const wrap = node("div", { class: `field ${f.type}`, id: `w${prefix === "f" ? "" : prefix}-${f.path.join("-")}` });
  wrap.append(node("label", { for: id }, f.label, f.required ? node("span", { class: "req" }, " (required)") : ""));
  let input;
  const common = { id, "data-path": JSON.stringify(f.path), "data-type": f.type, "data-pointer": pointer };
  switch (f.type) {
    case "select": {
      input = node("select", common);
      for (const [val, label] of f.options) input.append(node("option", { value: val }, label));
      const cur = v === undefined ? "" : String(v);
      if (!f.options.some(([val]) => val === cur)) input.append(node("option", { value: cur }, cur));
      input.value = cur;
      if (f.enumTypes && f.enumTypes !== "string") input.dataset.type = "enum-" + f.enumTypes;
      break;
    }
    case "bool":
      input = node("select", common, node("option", { value: "" }, "default"), node("option", { value: "true" }, "yes"), node("option", { value: "false" }, "no"));
      input.value = v === undefined ? "" : String(!!v);
      break;
    case "textarea":
      input = node("textarea", { ...common, rows: f.rows || 2 });
      input.value = v === undefined ? "" : String(v);
      break;
    case "lines":
      input = node("textarea", { ...common, rows: f.rows || 2, spellcheck: "false", class: "mono" });
      input.value = Array.isArray(v) ? v.join("\n") : (v === undefined ? "" : String(v));
      break;
    case "json":
      input = node("textarea", { ...common, rows: f.rows || 4, spellcheck: "false", class: "mono" });
      input.value = v === undefined ? "" : (typeof v === "string" ? v : JSON.stringify(v, null, 2));
      break;
    case "number":
      input = node("input", { ...common, type: "number", inputmode: "decimal", min: f.min, max: f.max, step: f.step,
        placeholder: typeof f.placeholder === "function" ? f.placeholder(obj) : f.placeholder });
      input.value = v === undefined ? "" : String(v);
      break;
    default: {
      const ph = typeof f.placeholder === "function" ? f.placeholder(obj) : f.placeholder;
      input = node("input", { ...common, type: "text", placeholder: ph, class: f.mono ? "mono" : undefined, spellcheck: "false" });
      input.value = v === undefined ? "" : (typeof v === "string" ? v : JSON.stringify(v));
    }
  }
  if (f.required) input.setAttribute("aria-required", "true");
  input.addEventListener("input", onInput);
  input.addEventListener("change", onInput);
  wrap.append(input);
  if (f.hint) { wrap.append(node("span", { class: "hint", id: `${id}-hint` }, f.hint)); described.push(`${id}-hint`); }
  if (f.effective) {
    wrap.append(node("span", { class: "effective", id: `${id}-eff`, "data-effective": f.path.join("/"), "data-for": id }));
    described.push(`${id}-eff`);
  }
  wrap.append(node("p", { class: "field-error", id: `${id}-err`, "aria-live": "polite" }));
  described.push(`${id}-err`);
  input.setAttribute("aria-describedby", described.join(" "));
  return wrap;
}

// readField sets the input's value into out.
export function readField(input, out) {
  const path = JSON.parse(input.dataset.path);
  const raw = input.value;
  const err = document.getElementById(`${input.id}-err`);
  let v;
  switch (input.dataset.type) {
    case "number":
      v = raw === "" ? undefined : Number(raw);
      if (Number.isNaN(v)) v = raw;
      break;
    case "enum-integer": case "enum-number":
      v = raw === "" ? undefined : Number(raw);
      break;
    case "enum-boolean": case "bool":
      v = raw === "" ? undefined : raw === "true";
      break;
    case "lines": {
      const lines = raw.split("\n").map((s) => s.trim()).filter(Boolean);
      v = lines.length ? lines : undefined;
      break;
    }
    case "json":
      if (raw.trim() === "") v = undefined;
      else {
        try {
          v = JSON.parse(raw);
          if (err && err.dataset.client) { err.textContent = ""; delete err.dataset.client; input.removeAttribute("aria-invalid"); }
        } catch (e) {
          v = raw;
          if (err) { err.textContent = `not JSON: ${e.message}`; err.dataset.client = "1"; input.setAttribute("aria-invalid", "true"); }
        }
      }
      break;
    default:
      v = raw === "" ? undefined : raw;
  }
  setField(out, path, v);
}

// fieldError shows a problem beside the field its pointer falls in (the
// field of the longest pointer that is a prefix of it).
export function fieldError(p, cls) {
  const ptr = p.pointer || "";
  if (!ptr) return;
  let best = null;
  for (const input of document.querySelectorAll("#op-form [data-pointer]")) {
    const fp = input.dataset.pointer;
    if ((ptr === fp || ptr.startsWith(fp + "/")) && (!best || fp.length > best.dataset.pointer.length)) best = input;
  }
  if (!best) return;
  const err = document.getElementById(`${best.id}-err`);
  if (!err) return;
  const msg = ptr === best.dataset.pointer ? p.message : `${ptr.slice(best.dataset.pointer.length + 1)}: ${p.message}`;
  err.textContent = err.textContent ? `${err.textContent} · ${msg}` : msg;
  err.classList.toggle("warning", cls === "warning");
  if (cls === "problem") best.setAttribute("aria-invalid", "true");
}
