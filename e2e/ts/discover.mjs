#!/usr/bin/env node
// Crank end-to-end discovery client: an agent-like script that finds a
// tool through an endpoint's discovery meta-tools with the official
// TypeScript SDK, and prints one JSON document.
//
// Usage: node discover.mjs <mcp-url> <query>
//
//   1. listTools: the endpoint's list (the meta-tools in discovery mode)
//   2. search_tools {query}: the ranked matches
//   3. describe_tool {name}: the best match's full definition
//   4. call_tool {name, arguments: {}} with a progress handler: the best
//      match's result, and the progress notifications relayed meanwhile
//
// Output (stdout): {"tools":[names], "hits":[{name, mode, score}],
//   "described":{...}, "progress":<count>, "firstProgress":"...",
//   "isError":bool, "result":"<text, cut at 2000 characters>"}
//
// Exit codes: 0 ran, 1 failure or overall timeout, 2 usage error.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';

const OVERALL_TIMEOUT_MS = Number(process.env.CRANK_E2E_TIMEOUT_MS || 60000);

if (process.argv.length !== 4) {
  process.stderr.write('usage: node discover.mjs <mcp-url> <query>\n');
  process.exit(2);
}
const url = new URL(process.argv[2]);
const query = process.argv[3];

setTimeout(() => {
  process.stderr.write(`discover.mjs: timed out after ${OVERALL_TIMEOUT_MS}ms\n`);
  process.exit(1);
}, OVERALL_TIMEOUT_MS).unref();

function text(result) {
  return (result.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('');
}

const client = new Client({ name: 'crank-e2e-discover', version: '1.0.0' });
const transport = new StreamableHTTPClientTransport(url);
try {
  await client.connect(transport);
  const out = {};
  out.tools = (await client.listTools()).tools.map((t) => t.name);

  const search = await client.callTool({ name: 'search_tools', arguments: { query } });
  if (search.isError) throw new Error(`search_tools: ${text(search)}`);
  out.hits = search.structuredContent.tools.map(({ name, mode, score }) => ({ name, mode, score }));
  const best = out.hits[0]?.name;
  if (!best) throw new Error(`search_tools found nothing for ${JSON.stringify(query)}`);

  const described = await client.callTool({ name: 'describe_tool', arguments: { name: best } });
  if (described.isError) throw new Error(`describe_tool: ${text(described)}`);
  out.described = described.structuredContent;

  let progress = 0;
  const result = await client.callTool({ name: 'call_tool', arguments: { name: best, arguments: {} } },
    CallToolResultSchema, {
      onprogress: (p) => {
        if (progress === 0) out.firstProgress = p.message ?? null;
        progress++;
      },
      timeout: OVERALL_TIMEOUT_MS,
    });
  out.progress = progress;
  out.isError = Boolean(result.isError);
  out.result = text(result).slice(0, 2000);
  await transport.terminateSession();
  await client.close();
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(0);
} catch (e) {
  process.stderr.write(`discover.mjs: ${e?.stack ?? e}\n`);
  process.exit(1);
}
