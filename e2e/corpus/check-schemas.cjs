// Reads JSON lines {"id": ..., "schema": {...}} on stdin and writes one
// line {"id": ..., "error": "..."} for each schema that Ajv refuses as
// JSON Schema 2020-12 with ECMA-262 patterns under the u flag, as the
// TypeScript MCP clients (Ajv-based) compile a tool's schemas: the schema
// must be valid against the 2020-12 meta-schema (Ajv's validateSchema),
// every pattern and patternProperties key must compile as a JavaScript
// RegExp with the u flag, and every local $ref must resolve. (Compiling
// each schema whole, CHECK_COMPILE=1, says the same at ten times the cost.)
const Ajv2020 = require("ajv/dist/2020").default;
const readline = require("readline");

const ajv = new Ajv2020({ strict: false, validateFormats: false, unicodeRegExp: true, allErrors: false });
const compile = process.env.CHECK_COMPILE === "1";

function pointer(root, ref) {
  if (ref === "#") return root;
  if (!ref.startsWith("#/")) return undefined;
  let cur = root;
  for (const raw of ref.slice(2).split("/")) {
    const tok = decodeURIComponent(raw).replace(/~1/g, "/").replace(/~0/g, "~");
    if (cur === null || typeof cur !== "object" || !(tok in cur)) return undefined;
    cur = cur[tok];
  }
  return cur;
}

function walk(root, node, at) {
  if (Array.isArray(node)) {
    node.forEach((e, i) => walk(root, e, at + "/" + i));
    return;
  }
  if (node === null || typeof node !== "object") return;
  for (const [k, v] of Object.entries(node)) {
    if (k === "enum" || k === "const" || k === "default" || k === "examples") continue;
    if (k === "pattern" && typeof v === "string") new RegExp(v, "u");
    if (k === "patternProperties" && v && typeof v === "object") for (const p of Object.keys(v)) new RegExp(p, "u");
    if (k === "$ref" && typeof v === "string" && pointer(root, v) === undefined) throw new Error(`${at}: $ref ${v} resolves to nothing`);
    if (k === "properties" && v && typeof v === "object") {
      for (const [n, s] of Object.entries(v)) walk(root, s, at + "/properties/" + n);
      continue;
    }
    walk(root, v, at + "/" + k);
  }
}

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on("line", (line) => {
  if (!line.trim()) return;
  let rec;
  try {
    rec = JSON.parse(line);
  } catch (e) {
    process.stdout.write(JSON.stringify({ id: "?", error: "not JSON: " + e.message }) + "\n");
    return;
  }
  try {
    if (compile) {
      ajv.compile(rec.schema);
      ajv.removeSchema();
    } else {
      if (!ajv.validateSchema(rec.schema)) throw new Error(ajv.errorsText(ajv.errors));
      walk(rec.schema, rec.schema, "#");
    }
  } catch (e) {
    process.stdout.write(JSON.stringify({ id: rec.id, error: String(e.message).slice(0, 300) }) + "\n");
  }
});
