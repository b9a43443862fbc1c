// Forms of the console: the operation form's blocks, generated from the
// operation entry's JSON Schema (GET /crank/schema/operation, derived
// from the host's one definition of an entry), fields generated from a
// JSON Schema (an adapter's config, a tool's input), and the placing of
// the admin API's problems beside their fields.

const MODES = "x-crank-modes";

// opFields are the blocks of the operation form, from the entry's schema:
// its scalar fields first (basics), then a block for each object field
// that has fields of its own (limits, aggregation, safety, family, job,
// ...), titled by the schema, then the fields written as JSON (the
// schemas). A block or field the schema gives x-crank-modes shows only
// in those modes. The adapter config has a block of its own (app.js).
export function opFields(schema) {
  const props = (schema && schema.properties) || {};
  const pick = (keep) => {
    const out = { properties: {}, required: schema.required };
    for (const [name, p] of Object.entries(props)) if (name !== "config" && keep(p)) out.properties[name] = p;
    return out;
  };
  const scalar = (p) => !p.properties && ["string", "integer", "number", "boolean"].includes(p.type);
  const blocks = [{ id: "basics", legend: schema.title || "Operation", fields: schemaFields(pick(scalar), [], undefined, true) }];
  for (const [name, p] of Object.entries(props)) {
    if (name === "config" || !p.properties) continue;
    blocks.push({ id: name, legend: p.title || name, note: p.description, modes: p[MODES],
      fields: schemaFields(p, [name], undefined, true) });
  }
  blocks.push({ id: "schemas", legend: "Schemas", fields: schemaFields(pick((p) => !scalar(p) && !p.properties), [], undefined, true) });
  return blocks;
}

// familyRoles are the roles of a mode's tool family, from the schema's
// family block (its {role}_tool_name fields for that mode).
export function familyRoles(schema, mode) {
  const fam = (schema && schema.properties && schema.properties.family && schema.properties.family.properties) || {};
  return Object.entries(fam).filter(([, p]) => (p[MODES] || []).includes(mode)).map(([k]) => k.replace(/_tool_name$/, ""));
}

// schemaFields are the fields of a JSON Schema's properties, under base;
// effective marks them to show the value the host makes of them.
export function schemaFields(schema, base, prefix, effective = false) {
  const props = (schema && schema.properties) || {};
  const required = new Set((schema && schema.required) || []);
  const out = [];
  for (const [name, p] of Object.entries(props)) {
    let type = Array.isArray(p.type) ? p.type.find((t) => t !== "null") : p.type;
    const f = { path: [...base, name], label: p.title ? `${p.title} (${name})` : name, hint: p.description || "",
      required: required.has(name), prefix, modes: p[MODES], effective };
    const def = p.default === undefined ? undefined : (typeof p.default === "string" ? p.default : JSON.stringify(p.default));
    if (def !== undefined) f.placeholder = `default: ${def}`;
    if (Array.isArray(p.enum)) {
      f.type = "select";
      f.options = [["", required.has(name) ? "choose…" : (def === undefined ? "default" : `default (${def})`)], ...p.enum.map((v) => [String(v), String(v)])];
      f.enumTypes = type;
    } else if (type === "string") f.type = "text";
    else if (type === "integer" || type === "number") {
      f.type = "number"; f.step = type === "integer" ? "1" : "any"; f.min = p.minimum ?? p.exclusiveMinimum; f.max = p.maximum;
    } else if (type === "boolean") f.type = "bool";
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
  const wrap = node("div", { class: `field ${f.type}`, id: `w${prefix === "f" ? "" : prefix}-${f.path.join("-")}`,
    "data-modes": f.modes ? f.modes.join(" ") : undefined });
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
      input = node("input", { ...common, type: "number", inputmode: "decimal", min: f.min, max: f.max, step: f.step, placeholder: f.placeholder });
      input.value = v === undefined ? "" : String(v);
      break;
    default: {
      input = node("input", { ...common, type: "text", placeholder: f.placeholder, spellcheck: "false" });
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
