#!/usr/bin/env node
// The official TypeScript SDK v2's client (@modelcontextprotocol/client)
// calling tools through a gateway, in either protocol generation, and
// answering what it is asked: a form with {"name":"Grace"}, a URL with
// accept, sampling with "4, to <first message's text>" from "ts-v2-model".
// In the 2025 generation it is asked during a call (on its session); in
// 2026-07-28 it gets input-required results and the SDK retries the call
// with its answers.
//
// Usage: node client-v2.mjs <mcp-url> <legacy|modern> <calls>
//   calls: a JSON array of {"name": "...", "arguments": {...}}
// Output (stdout, one JSON document):
//   {"protocolVersion": "...", "asked": ["elicit form <message>",
//    "elicit url <message> <url>", "sample <text>"],
//    "steps": [{"ok": true, "result": <CallToolResult>} | {"ok": false, "error": "..."}]}
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const [url, generation, calls] = process.argv.slice(2);
if (!url || !["legacy", "modern"].includes(generation) || !calls) {
  console.error("usage: client-v2.mjs <mcp-url> <legacy|modern> <calls>");
  process.exit(2);
}
const asked = [];
const client = new Client({ name: "crank-e2e-ts-v2", version: "1.0.0" }, {
  capabilities: { elicitation: { form: {}, url: {} }, sampling: {} },
  versionNegotiation: { mode: generation === "modern" ? { pin: "2026-07-28" } : "legacy" },
});
client.setRequestHandler("elicitation/create", async (req) => {
  const p = req.params;
  if (p.mode === "url") {
    asked.push(`elicit url ${p.message} ${p.url}`);
    return { action: "accept" };
  }
  asked.push(`elicit form ${p.message}`);
  return { action: "accept", content: { name: "Grace" } };
});
client.setRequestHandler("sampling/createMessage", async (req) => {
  const first = req.params.messages[0]?.content;
  const said = Array.isArray(first) ? first.map((c) => c.text).join("") : first?.text;
  asked.push(`sample ${said}`);
  return { role: "assistant", model: "ts-v2-model", content: { type: "text", text: `4, to ${said}` } };
});

const timer = setTimeout(() => {
  console.error("client-v2.mjs: timed out");
  process.exit(1);
}, 60000);
const transport = new StreamableHTTPClientTransport(new URL(url));
try {
  await client.connect(transport);
} catch (err) {
  console.error(`connect: ${err.stack ?? err}`);
  process.exit(1);
}
const steps = [];
for (const call of JSON.parse(calls)) {
  try {
    steps.push({ ok: true, result: await client.callTool({ name: call.name, arguments: call.arguments ?? {} }) });
  } catch (err) {
    steps.push({ ok: false, error: String(err.message ?? err) });
  }
}
console.log(JSON.stringify({ protocolVersion: transport.protocolVersion ?? client.getNegotiatedProtocolVersion?.(), asked, steps }));
clearTimeout(timer);
await client.close().catch(() => {});
process.exit(0);
