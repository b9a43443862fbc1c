#!/usr/bin/env node
// Crank end-to-end client: drives a running gateway through the official
// TypeScript MCP SDK (Streamable HTTP transport) and prints one JSON document.
//
// Usage: node client.mjs <mcp-url> <script.json | JSON array string>
//
// The script is a JSON array of steps run in order over one connected
// client/session. Supported ops:
//   {"op":"listTools", "cursor"?: "...", "all"?: true, "summary"?: true}
//     all follows nextCursor to the last page (the client then holds every
//     tool's output-schema validator); summary answers {"count": n,
//     "outputSchemas": n} instead of the tools (a large document's list)
//   {"op":"callTool", "name": "...", "arguments"?: {...}, "timeoutMs"?: n,
//    "progress"?: true}   (asks for progress; the step's result then has
//                          "progress": [{"progress":n,"message":"..."}, ...]
//                          with every notification received, in order)
//   {"op":"ping"}
//   {"op":"listResources"}, {"op":"listResourceTemplates"}, {"op":"listPrompts"}
//   {"op":"readResource", "uri": "..."}
//   {"op":"getPrompt", "name": "...", "arguments"?: {...}}
//   {"op":"terminateSession"}   (HTTP DELETE of the session)
//   {"op":"sleep", "ms": n}
// A callTool step's result has "validated": true when the SDK held an
// output-schema validator for the tool (it checked structuredContent).
// A callTool step may also carry "until": {"field": "...", "equals": <value>}:
// the call is repeated (every 100ms, for at most "untilMs", default 10000)
// until its structuredContent[field] equals the value. An argument value
// written "{{N.field}}" is replaced by structuredContent[field] of step N
// (0-based), so a step can use the session or job ID an earlier one got.
//
// Output (stdout, exactly one JSON document):
//   {"serverInfo":{...},"protocolVersion":"...","sessionId":"...","steps":[...]}
// Each step is {"ok":true,"result":<SDK result>} or
//   {"ok":false,"error":{"code":<number|null>,"message":"...","data"?:...,
//                        "source":"...","result"?:<raw result>}}
// source is one of:
//   "jsonrpc"    a JSON-RPC error response (code/message/data as sent; the
//                SDK's own request timeout also surfaces this way, -32001)
//   "validation" the server answered with a result but the SDK rejected it
//                (e.g. callTool output-schema checks); result is the raw answer
//   "http"       transport-level HTTP failure; code is the HTTP status
//   "other"      anything else (network errors, ...); code is null
//   "stream"     the call's SSE stream broke before its first event, so it
//                cannot be resumed: data.retryable is true (retry the call)
//
// Environment: CRANK_E2E_CLIENT_ID and CRANK_E2E_CLIENT_SECRET make it an
// OAuth client of the gateway's authorization server (client_credentials),
// asking for CRANK_E2E_SCOPE, of the issuer CRANK_E2E_ISSUER.
// CRANK_E2E_ANSWER=1 makes it declare sampling, elicitation (form and url)
// and roots and answer them: a form with {"name":"Grace"}, a URL with
// accept, sampling with "4, to <first message's text>" from "ts-model",
// roots with file:///work/project; the output's "asked" lists what it was
// asked, in order ("elicit <mode> <message>", "sample <text>", "roots").
//
// Exit codes: 0 script ran (steps may have failed), 1 connect/initialize
// failure or overall timeout, 2 usage error.

import { readFileSync, existsSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  StreamableHTTPClientTransport,
  StreamableHTTPError,
} from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  McpError,
  ElicitRequestSchema,
  CreateMessageRequestSchema,
  ListRootsRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';

const OVERALL_TIMEOUT_MS = Number(process.env.CRANK_E2E_TIMEOUT_MS || 30000);

function usage(msg) {
  if (msg) process.stderr.write(`client.mjs: ${msg}\n`);
  process.stderr.write('usage: node client.mjs <mcp-url> <script.json | JSON array string>\n');
  process.exit(2);
}

function parseArgs(argv) {
  if (argv.length !== 2) usage('expected exactly two arguments');
  const [rawURL, scriptArg] = argv;
  let url;
  try {
    url = new URL(rawURL);
  } catch {
    usage(`invalid URL: ${rawURL}`);
  }
  let text = scriptArg;
  const trimmed = scriptArg.trim();
  if (!trimmed.startsWith('[') && existsSync(scriptArg)) {
    try {
      text = readFileSync(scriptArg, 'utf8');
    } catch (e) {
      usage(`cannot read script ${scriptArg}: ${e.message}`);
    }
  }
  let script;
  try {
    script = JSON.parse(text);
  } catch (e) {
    usage(`script is neither a readable file nor valid JSON: ${e.message}`);
  }
  if (!Array.isArray(script)) usage('script must be a JSON array of steps');
  for (const [i, step] of script.entries()) {
    if (step === null || typeof step !== 'object' || typeof step.op !== 'string') {
      usage(`step ${i}: must be an object with a string "op"`);
    }
    if (!['listTools', 'callTool', 'ping', 'terminateSession', 'sleep', 'listResources', 'listResourceTemplates',
      'listPrompts', 'readResource', 'getPrompt'].includes(step.op)) {
      usage(`step ${i}: unknown op ${JSON.stringify(step.op)}`);
    }
    if (step.op === 'callTool' && typeof step.name !== 'string') {
      usage(`step ${i}: callTool needs a string "name"`);
    }
  }
  return { url, script };
}

// The SDK's McpError prefixes messages with "MCP error <code>: "; strip it so
// the Go side sees the server's message verbatim.
function errorInfo(err, rawResult) {
  let source = 'other';
  if (rawResult !== undefined) source = 'validation';
  else if (err instanceof McpError) source = 'jsonrpc';
  else if (err instanceof StreamableHTTPError) source = 'http';
  const code = typeof err?.code === 'number' ? err.code : null;
  let message = err instanceof Error ? err.message : String(err);
  if (code !== null) {
    const prefix = `MCP error ${code}: `;
    if (message.startsWith(prefix)) message = message.slice(prefix.length);
  }
  const info = { code, message, source };
  if (err?.data !== undefined) info.data = err.data;
  if (rawResult !== undefined) info.result = rawResult;
  return info;
}

// fill replaces "{{N.field}}" argument values with earlier steps' results.
function fill(args, steps) {
  const out = {};
  for (const [k, v] of Object.entries(args ?? {})) {
    const m = typeof v === 'string' ? /^\{\{(\d+)\.(\w+)\}\}$/.exec(v) : null;
    out[k] = m ? steps[Number(m[1])]?.result?.structuredContent?.[m[2]] : v;
  }
  return out;
}

async function callUntil(client, transport, step, steps) {
  const deadline = Date.now() + (step.untilMs ?? 10000);
  for (;;) {
    const result = await runStep(client, transport, { ...step, until: undefined }, steps);
    if (result?.structuredContent?.[step.until.field] === step.until.equals || Date.now() > deadline) {
      return result;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function runStep(client, transport, step, steps) {
  if (step.op === 'callTool') {
    step = { ...step, arguments: fill(step.arguments, steps) };
    if (step.until) return callUntil(client, transport, step, steps);
  }
  switch (step.op) {
    case 'sleep':
      await new Promise((r) => setTimeout(r, step.ms ?? 0));
      return {};
    case 'listTools': {
      let result = await client.listTools(step.cursor !== undefined ? { cursor: step.cursor } : undefined);
      if (step.all) {
        const tools = [...result.tools];
        while (result.nextCursor) {
          result = await client.listTools({ cursor: result.nextCursor });
          tools.push(...result.tools);
        }
        // The SDK keeps the validators of the last page listed only.
        client.cacheToolMetadata(tools);
        result = { tools };
      }
      if (!step.summary) return result;
      return { count: result.tools.length, outputSchemas: result.tools.filter((t) => t.outputSchema).length };
    }
    case 'ping':
      return client.ping();
    case 'listResources':
      return client.listResources();
    case 'listResourceTemplates':
      return client.listResourceTemplates();
    case 'listPrompts':
      return client.listPrompts();
    case 'readResource':
      return client.readResource({ uri: step.uri });
    case 'getPrompt':
      return client.getPrompt({ name: step.name, arguments: step.arguments ?? {} });
    case 'terminateSession':
      await transport.terminateSession();
      return {};
    case 'callTool': {
      const options = step.timeoutMs !== undefined ? { timeout: step.timeoutMs } : {};
      if (!step.progress) {
        const result = await client.callTool({ name: step.name, arguments: step.arguments ?? {} }, undefined, options);
        return { ...result, validated: client.getToolOutputValidator(step.name) !== undefined };
      }
      const progress = [];
      options.onprogress = (p) => {
        const n = { progress: p.progress };
        if (p.total !== undefined) n.total = p.total;
        if (p.message !== undefined) n.message = p.message;
        progress.push(n);
      };
      const result = await client.callTool({ name: step.name, arguments: step.arguments ?? {} }, undefined, options);
      return { ...result, progress };
    }
  }
  throw new Error(`unknown op ${step.op}`);
}

async function main() {
  const { url, script } = parseArgs(process.argv.slice(2));

  // With CRANK_E2E_CLIENT_ID and CRANK_E2E_CLIENT_SECRET the client is an
  // OAuth client (client_credentials): on the gateway's 401 the SDK
  // discovers the protected resource metadata and the authorization
  // server from it, and gets a token for the resource.
  let authProvider;
  if (process.env.CRANK_E2E_CLIENT_ID) {
    authProvider = new ClientCredentialsProvider({
      clientId: process.env.CRANK_E2E_CLIENT_ID,
      clientSecret: process.env.CRANK_E2E_CLIENT_SECRET,
      // The SDK's client_credentials request asks for the provider's
      // scope only (not the challenge's).
      scope: process.env.CRANK_E2E_SCOPE,
      expectedIssuer: process.env.CRANK_E2E_ISSUER,
    });
  }
  const transport = new StreamableHTTPClientTransport(url, { authProvider, fetch: watchedFetch });
  const answer = process.env.CRANK_E2E_ANSWER === '1';
  const capabilities = answer ? { sampling: {}, elicitation: { form: {}, url: {} }, roots: {} } : {};
  const client = new Client({ name: 'crank-e2e-ts', version: '0.0.0' }, { capabilities });
  const asked = [];
  if (answer) {
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      const mode = req.params.mode ?? 'form';
      asked.push(`elicit ${mode} ${req.params.message}`);
      return mode === 'url' ? { action: 'accept' } : { action: 'accept', content: { name: 'Grace' } };
    });
    client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
      const text = req.params.messages?.[0]?.content?.text ?? '';
      asked.push(`sample ${text}`);
      return { model: 'ts-model', role: 'assistant', content: { type: 'text', text: `4, to ${text}` } };
    });
    client.setRequestHandler(ListRootsRequestSchema, async () => {
      asked.push('roots');
      return { roots: [{ uri: 'file:///work/project', name: 'project' }] };
    });
  }

  // Record what the server actually answered, so an error thrown after a
  // response arrived (SDK-side result validation) can be told apart from a
  // JSON-RPC error sent by the server.
  let lastResponse;
  const request = client.request.bind(client);
  client.request = async (...args) => {
    const res = await request(...args);
    lastResponse = res;
    return res;
  };

  try {
    await client.connect(transport);
  } catch (e) {
    process.stderr.write(`client.mjs: connect/initialize failed: ${e?.stack || e}\n`);
    await client.close().catch(() => {});
    process.exit(1);
  }

  const out = {
    serverInfo: client.getServerVersion() ?? null,
    protocolVersion: transport.protocolVersion ?? null,
    sessionId: transport.sessionId ?? null,
    steps: [],
  };
  if (answer) out.asked = asked;

  for (const step of script) {
    pending = `step ${out.steps.length} (${step.op}${step.name ? ' ' + step.name : ''})`;
    lastResponse = undefined;
    // A POST stream broken before its first event fails the step (watchedFetch).
    const broken = new Promise((_, reject) => {
      failStep = reject;
    });
    try {
      const result = await Promise.race([runStep(client, transport, step, out.steps), broken]);
      out.steps.push({ ok: true, result });
    } catch (e) {
      out.steps.push({ ok: false, error: e instanceof StreamBrokenError ? e.info : errorInfo(e, lastResponse) });
    } finally {
      failStep = undefined;
    }
  }

  await client.close().catch(() => {});
  await new Promise((resolve) => process.stdout.write(JSON.stringify(out) + '\n', resolve));
}

// A POST's SSE stream that breaks before its first event (the replica
// serving it died before even its priming event left) gives the SDK no
// event id to resume from: it reports the error to onerror, and the call
// waits for an answer that never comes, until its timeout. watchedFetch
// notices such a stream and fails the step running then (failStep) with a
// retryable error, as a client would retry the call; a stream with an
// event resumes as the SDK resumes it.
class StreamBrokenError extends Error {
  constructor(cause) {
    const message = `the call's SSE stream broke before its first event (${cause}): nothing to resume; retry the call`;
    super(message);
    this.info = { code: null, message, data: { retryable: true }, source: 'stream' };
  }
}

let failStep;

// sseEventLine finds the first field of an event (not a comment) in SSE text.
const sseEventLine = /^(id|data|event):/m;

async function watchedFetch(input, init) {
  const res = await fetch(input, init);
  const sse = (res.headers.get('content-type') ?? '').startsWith('text/event-stream');
  if ((init?.method ?? 'GET') !== 'POST' || !res.ok || !sse || !res.body) return res;
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  // seen is the start of the line in progress: enough to see a field name.
  let seen = '';
  let event = false;
  // The step that sent this POST: its stream may end after its answer
  // settled the step, when the next one runs.
  const fail = failStep;
  const broke = (cause) => {
    if (!event) fail?.(new StreamBrokenError(cause));
  };
  const body = new ReadableStream({
    async pull(controller) {
      let chunk;
      try {
        chunk = await reader.read();
      } catch (e) {
        broke(e?.message ?? String(e));
        controller.error(e);
        return;
      }
      if (chunk.done) {
        broke('it ended');
        controller.close();
        return;
      }
      if (!event) {
        seen += decoder.decode(chunk.value, { stream: true });
        event = sseEventLine.test(seen);
        const nl = seen.lastIndexOf('\n');
        seen = seen.slice(nl + 1, nl + 1 + 8);
      }
      controller.enqueue(chunk.value);
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
  return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
}

// pending names the step running now, for the overall timeout's message.
let pending = 'connect';

const timer = setTimeout(() => {
  process.stderr.write(`client.mjs: overall timeout of ${OVERALL_TIMEOUT_MS}ms exceeded in ${pending}\n`);
  process.exit(1);
}, OVERALL_TIMEOUT_MS);
timer.unref();

main().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(`client.mjs: ${e?.stack || e}\n`);
    process.exit(1);
  },
);
