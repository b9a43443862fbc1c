#!/usr/bin/env node
// An MCP server over stdio, on the official TypeScript SDK, whose tools run
// as MCP Tasks (protocol 2025-11-25) and end in the ways server-everything's
// do not: the mcp adapter's tests (plugins/mcp/tasks_test.go) call it.
//
// Usage: node task-server.mjs
//
// Tools:
//   refuses  (taskSupport required): the task fails with a tool error
//            result (isError, "no such report").
//   breaks   (taskSupport required): the task fails without a result,
//            its status message "the report store is down".
//   echoes   (taskSupport optional): the task completes with {text}.
// Each task suggests a poll interval of 1ms and ends after 50ms.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { InMemoryTaskStore } from "@modelcontextprotocol/sdk/experimental/tasks";
import { z } from "zod";

const server = new McpServer(
  { name: "crank-task-server", version: "1" },
  {
    capabilities: { tools: {}, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
    taskStore: new InMemoryTaskStore(),
  },
);

function taskTool(name, description, taskSupport, end) {
  server.experimental.tasks.registerToolTask(
    name,
    { description, inputSchema: { text: z.string().optional() }, execution: { taskSupport } },
    {
      createTask: async (args, extra) => {
        const task = await extra.taskStore.createTask({ ttl: 60000, pollInterval: 1 });
        setTimeout(() => end(task.taskId, args, extra.taskStore).catch(console.error), 50);
        return { task };
      },
      getTask: async (_args, extra) => extra.taskStore.getTask(extra.taskId),
      getTaskResult: async (_args, extra) => extra.taskStore.getTaskResult(extra.taskId),
    },
  );
}

taskTool("refuses", "Ends its task failed with a tool error.", "required", (id, _args, store) =>
  store.storeTaskResult(id, "failed", { content: [{ type: "text", text: "no such report" }], isError: true }));
taskTool("breaks", "Ends its task failed without a result.", "required", (id, _args, store) =>
  store.updateTaskStatus(id, "failed", "the report store is down"));
taskTool("echoes", "Echoes its text from a task.", "optional", (id, args, store) =>
  store.storeTaskResult(id, "completed", { content: [{ type: "text", text: args.text ?? "" }] }));

await server.connect(new StdioServerTransport());
