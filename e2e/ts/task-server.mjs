#!/usr/bin/env node
// An MCP server on the official TypeScript SDK whose tools run as MCP
// Tasks (protocol 2025-11-25) and end in the ways server-everything's do
// not: the mcp adapter's tests (plugins/mcp/tasks_test.go) call it over
// stdio, the end-to-end adoption test (e2e/adopt_test.go) over Streamable
// HTTP.
//
// Usage: node task-server.mjs            (stdio)
//        node task-server.mjs http PORT  (Streamable HTTP on 127.0.0.1:PORT/mcp,
//                                         a session per client, its tasks its own)
//
// Tools:
//   refuses  (taskSupport required): the task fails with a tool error
//            result (isError, "no such report").
//   breaks   (taskSupport required): the task fails without a result,
//            its status message "the report store is down".
//   echoes   (taskSupport optional): the task completes with {text}.
//   waits    (taskSupport required): the task stays working, its status
//            message "waiting for {text}", until it is cancelled, when
//            the server prints "cancelled {text}" on stdout.
// Each task suggests a poll interval of 1ms; the first three end after
// 50ms.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { InMemoryTaskStore } from "@modelcontextprotocol/sdk/experimental/tasks";
import { serve } from "./serve.mjs";
import { z } from "zod";

const taskStore = new InMemoryTaskStore();

function newServer() {
  const server = new McpServer(
    { name: "crank-task-server", version: "1" },
    {
      capabilities: { tools: {}, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
      taskStore,
    },
  );
  const taskTool = (name, description, taskSupport, start) =>
    server.experimental.tasks.registerToolTask(
      name,
      { description, inputSchema: { text: z.string().optional() }, execution: { taskSupport } },
      {
        createTask: async (args, extra) => {
          const task = await extra.taskStore.createTask({ ttl: 60000, pollInterval: 1 });
          start(task.taskId, args, extra.taskStore);
          return { task };
        },
        getTask: async (_args, extra) => extra.taskStore.getTask(extra.taskId),
        getTaskResult: async (_args, extra) => extra.taskStore.getTaskResult(extra.taskId),
      },
    );
  const after50ms = (end) => (id, args, store) => setTimeout(() => end(id, args, store).catch(console.error), 50);
  taskTool("refuses", "Ends its task failed with a tool error.", "required", after50ms((id, _args, store) =>
    store.storeTaskResult(id, "failed", { content: [{ type: "text", text: "no such report" }], isError: true })));
  taskTool("breaks", "Ends its task failed without a result.", "required", after50ms((id, _args, store) =>
    store.updateTaskStatus(id, "failed", "the report store is down")));
  taskTool("echoes", "Echoes its text from a task.", "optional", after50ms((id, args, store) =>
    store.storeTaskResult(id, "completed", { content: [{ type: "text", text: args.text ?? "" }] })));
  taskTool("waits", "Works until cancelled.", "required", (id, args, store) => {
    store.updateTaskStatus(id, "working", `waiting for ${args.text ?? ""}`).catch(console.error);
    const watch = setInterval(async () => {
      const task = await store.getTask(id);
      if (task?.status === "cancelled") {
        clearInterval(watch);
        console.log(`cancelled ${args.text ?? ""}`);
      }
    }, 20);
  });
  return server;
}

await serve(newServer);
