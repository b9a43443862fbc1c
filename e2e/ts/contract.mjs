#!/usr/bin/env node
// Crank's contract sweep: every tool an endpoint publishes, called with an
// official TypeScript MCP SDK client, which checks each result against the
// tool's published output schema (it throws -32602 when structuredContent
// does not match, -32600 when it is missing). It prints one JSON document
// of what it listed and what every call answered; the Go test
// (e2e/contract_test.go) judges it.
//
// Usage: node contract.mjs <mcp-url> <client> <plan.json | JSON>
//   client: v1          @modelcontextprotocol/sdk (1.x), 2025-11-25 session
//           v2          @modelcontextprotocol/client (2.x), 2025-11-25 session
//           v2-modern   @modelcontextprotocol/client, pinned to 2026-07-28
//   plan:   {"args": {"<tool>": {...}}, "skip": ["<tool>", ...]}
//           args are known-good arguments, laid over the ones generated from
//           each tool's input schema; skipped tools are listed, not called.
//
// A session or async_job family is called in order: its start tool (the
// arguments above), then its poll (until items or 5 s), status and result
// (until ready or 15 s) tools with the id the start returned, then its stop
// or cancel tool.
//
// Output: {"client","protocolVersion","tools":[{name,title,annotations,
// inputSchema,outputSchema,role}],"calls":[{"tool","arguments","ok","isError",
// "structuredContent","text","error":{"code","message"}}]}

import { readFileSync, existsSync } from 'node:fs';

const [url, which, planArg] = process.argv.slice(2);
if (!url || !which || !planArg) {
  process.stderr.write('usage: node contract.mjs <mcp-url> <v1|v2|v2-modern> <plan.json | JSON>\n');
  process.exit(2);
}
const plan = JSON.parse(planArg.trim().startsWith('{') || !existsSync(planArg) ? planArg : readFileSync(planArg, 'utf8'));
const known = plan.args || {};
const skip = new Set(plan.skip || []);

async function connect() {
  const info = { name: `crank-contract-${which}`, version: '1.0.0' };
  if (which === 'v1') {
    const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
    const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    const client = new Client(info);
    await client.connect(new StreamableHTTPClientTransport(new URL(url)));
    return { client, version: () => client.transport?.protocolVersion ?? '2025-11-25' };
  }
  const { Client, StreamableHTTPClientTransport } = await import('@modelcontextprotocol/client');
  const opts = which === 'v2-modern' ? { versionNegotiation: { mode: { pin: '2026-07-28' } } } : {};
  const client = new Client(info, opts);
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return { client, version: () => client.getNegotiatedProtocolVersion?.() };
}

// sample is a value the schema accepts, as small as it can be: const,
// enum, default or an example where the schema has one; an object's
// required members; the fewest array items.
function sample(schema, root, depth = 0) {
  if (schema === true || schema === undefined || schema === null || depth > 12) return null;
  if (schema === false) return null;
  if (schema.$ref && schema.$ref.startsWith('#/')) {
    let s = root;
    for (const part of schema.$ref.slice(2).split('/')) s = s?.[part.replace(/~1/g, '/').replace(/~0/g, '~')];
    return sample(s, root, depth + 1);
  }
  if ('const' in schema) return schema.const;
  if (Array.isArray(schema.enum) && schema.enum.length) return schema.enum[0];
  if ('default' in schema) return schema.default;
  if (Array.isArray(schema.examples) && schema.examples.length) return schema.examples[0];
  for (const k of ['anyOf', 'oneOf']) {
    if (Array.isArray(schema[k]) && schema[k].length) {
      const pick = schema[k].find((s) => s && s.type !== 'null') ?? schema[k][0];
      return sample(pick, root, depth + 1);
    }
  }
  if (Array.isArray(schema.allOf) && schema.allOf.length) {
    return Object.assign({}, ...schema.allOf.map((s) => sample(s, root, depth + 1)).filter((v) => v && typeof v === 'object'));
  }
  let type = schema.type;
  if (Array.isArray(type)) type = type.find((t) => t !== 'null') ?? type[0];
  if (!type) type = schema.properties ? 'object' : schema.items ? 'array' : 'string';
  switch (type) {
    case 'object': {
      const out = {};
      for (const name of schema.required || []) out[name] = sample(schema.properties?.[name] ?? {}, root, depth + 1);
      return out;
    }
    case 'array': {
      const n = Math.max(schema.minItems || 0, 0);
      return Array.from({ length: n }, (_, i) => sample(schema.prefixItems?.[i] ?? schema.items ?? {}, root, depth + 1));
    }
    case 'integer':
    case 'number': {
      let n = schema.minimum ?? (schema.exclusiveMinimum !== undefined ? schema.exclusiveMinimum + 1 : 1);
      if (schema.maximum !== undefined && n > schema.maximum) n = schema.maximum;
      return type === 'integer' ? Math.ceil(n) : n;
    }
    case 'boolean':
      return false;
    case 'null':
      return null;
    default: {
      const formats = { 'date-time': '2026-01-01T00:00:00Z', date: '2026-01-01', email: 'a@example.com', uri: 'https://example.com', uuid: '00000000-0000-4000-8000-000000000000' };
      if (formats[schema.format]) return formats[schema.format];
      return 'a'.repeat(Math.max(schema.minLength || 1, 1));
    }
  }
}

function argsFor(tool) {
  const generated = sample(tool.inputSchema || { type: 'object' }, tool.inputSchema || {});
  return { ...(generated && typeof generated === 'object' ? generated : {}), ...(known[tool.name] || {}) };
}

const out = { client: which, protocolVersion: null, tools: [], calls: [] };
const timeout = setTimeout(() => {
  out.error = 'the sweep did not finish within 150 s';
  process.stdout.write(JSON.stringify(out), () => process.exit(1));
}, Number(process.env.CRANK_CONTRACT_TIMEOUT_MS || 150000));

const { client, version } = await connect();
out.protocolVersion = version() ?? null;
const tools = (await client.listTools()).tools;
out.tools = tools.map((t) => ({ name: t.name, title: t.title, annotations: t.annotations, inputSchema: t.inputSchema, outputSchema: t.outputSchema,
  role: t._meta?.['io.crank/execution']?.role }));
const byName = new Map(tools.map((t) => [t.name, t]));

async function call(name, args) {
  const rec = { tool: name, arguments: args };
  try {
    const r = await client.callTool({ name, arguments: args }, undefined, { timeout: 60000 });
    Object.assign(rec, { ok: true, isError: !!r.isError, structuredContent: r.structuredContent ?? null,
      text: (r.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('\n').slice(0, 2000) });
  } catch (e) {
    rec.ok = false;
    rec.error = { code: typeof e.code === 'number' ? e.code : null, message: String(e.message || e).slice(0, 2000) };
  }
  out.calls.push(rec);
  return rec;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const family = (t) => t._meta?.['io.crank/execution']?.tools;
const done = new Set();
for (const t of tools) {
  if (done.has(t.name) || skip.has(t.name)) continue;
  const fam = family(t);
  if (!fam || !fam.start) {
    done.add(t.name);
    await call(t.name, argsFor(t));
    continue;
  }
  for (const n of Object.values(fam)) done.add(n);
  if (skip.has(fam.start) || !byName.has(fam.start)) continue;
  const start = await call(fam.start, argsFor(byName.get(fam.start)));
  const sc = start.structuredContent || {};
  const id = sc.session_id ? { session_id: sc.session_id } : sc.job_id ? { job_id: sc.job_id } : null;
  if (!id) continue;
  if (fam.poll && byName.has(fam.poll)) {
    let cursor;
    for (const until = Date.now() + 5000; ;) {
      const r = await call(fam.poll, cursor ? { ...id, cursor } : id);
      cursor = r.structuredContent?.cursor ?? cursor;
      if (!r.ok || (r.structuredContent?.items || []).length > 0 || Date.now() > until) break;
      await sleep(250);
    }
  }
  if (fam.status && byName.has(fam.status)) await call(fam.status, id);
  if (fam.result && byName.has(fam.result)) {
    for (const until = Date.now() + 15000; ;) {
      const r = await call(fam.result, id);
      if (!r.ok || r.structuredContent?.ready || Date.now() > until) break;
      await sleep(250);
    }
  }
  for (const role of ['stop', 'cancel']) if (fam[role] && byName.has(fam[role])) await call(fam[role], id);
}
clearTimeout(timeout);
await client.close?.();
// exit once stdout has taken it all: a pipe takes a large document in
// several writes.
process.stdout.write(JSON.stringify(out), () => process.exit(0));
