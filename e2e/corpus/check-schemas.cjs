// Reads JSON lines {"id": ..., "schema": {...}} on stdin and writes one
// line {"id": ..., "error": "..."} for each schema Ajv refuses to compile
// as JSON Schema 2020-12 with ECMA-262 patterns under the u flag: what
// the TypeScript MCP clients (Ajv-based) do with a tool's schemas.
const Ajv2020 = require("ajv/dist/2020").default;
const readline = require("readline");

const ajv = new Ajv2020({ strict: false, validateFormats: false, unicodeRegExp: true, allErrors: false });
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
    ajv.compile(rec.schema);
  } catch (e) {
    process.stdout.write(JSON.stringify({ id: rec.id, error: String(e.message).slice(0, 300) }) + "\n");
  }
  ajv.removeSchema();
});
