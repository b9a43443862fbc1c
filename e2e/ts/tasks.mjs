#!/usr/bin/env node
// Crank end-to-end tasks client: drives an async_job start tool as an MCP
// task (protocol 2025-11-25) through the official TypeScript SDK's
// experimental tasks API, and prints one JSON document.
//
// Usage: node tasks.mjs <mcp-url> <config JSON>
//
// config: {"tool": "...", "arguments": {...}, "cancelArguments": {...}}
//   1. listTools (the SDK learns which tools take tasks from it)
//   2. callToolStream(tool, arguments): the task runs to its end; every
//      message of the stream is recorded
//   3. listTasks
//   4. callToolStream(tool, cancelArguments): on taskCreated, cancelTask;
//      the stream's messages and the cancelTask answer are recorded
//
// Output (stdout): {"protocolVersion":"...","capabilities":{...},
//   "taskSupport":"...", "finished":[<messages>], "tasks":[...],
//   "cancelled":[<messages>], "cancelAnswer":{...}}
// A message is {"type":"taskCreated"|"taskStatus","task":{...}},
// {"type":"result","result":{...}} or {"type":"error","error":{"code","message"}}.
//
// Exit codes: 0 ran, 1 failure or overall timeout, 2 usage error.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const OVERALL_TIMEOUT_MS = Number(process.env.CRANK_E2E_TIMEOUT_MS || 60000);

if (process.argv.length !== 4) {
  process.stderr.write('usage: node tasks.mjs <mcp-url> <config JSON>\n');
  process.exit(2);
}
const url = new URL(process.argv[2]);
let config;
try {
  config = JSON.parse(process.argv[3]);
} catch (e) {
  process.stderr.write(`tasks.mjs: config is not JSON: ${e.message}\n`);
  process.exit(2);
}

setTimeout(() => {
  process.stderr.write(`tasks.mjs: timed out after ${OVERALL_TIMEOUT_MS}ms\n`);
  process.exit(1);
}, OVERALL_TIMEOUT_MS).unref();

function record(message) {
  if (message.type === 'error') {
    return { type: 'error', error: { code: message.error?.code ?? null, message: String(message.error?.message ?? message.error) } };
  }
  return message;
}

const client = new Client({ name: 'crank-e2e-tasks', version: '1.0.0' });
const transport = new StreamableHTTPClientTransport(url);
try {
  await client.connect(transport);
  const out = {
    protocolVersion: transport.protocolVersion ?? null,
    capabilities: client.getServerCapabilities() ?? null,
  };
  const tools = await client.listTools();
  out.taskSupport = tools.tools.find((t) => t.name === config.tool)?.execution?.taskSupport ?? null;

  const tasks = client.experimental.tasks;
  out.finished = [];
  for await (const message of tasks.callToolStream({ name: config.tool, arguments: config.arguments })) {
    out.finished.push(record(message));
  }
  out.tasks = (await tasks.listTasks()).tasks;

  out.cancelled = [];
  for await (const message of tasks.callToolStream({ name: config.tool, arguments: config.cancelArguments })) {
    out.cancelled.push(record(message));
    if (message.type === 'taskCreated') {
      out.cancelAnswer = await tasks.cancelTask(message.task.taskId);
    }
  }
  await transport.terminateSession();
  await client.close();
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(0);
} catch (e) {
  process.stderr.write(`tasks.mjs: ${e?.stack ?? e}\n`);
  process.exit(1);
}
