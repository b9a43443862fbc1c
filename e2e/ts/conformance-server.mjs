#!/usr/bin/env node
// An MCP server built with the official TypeScript SDK's McpServer (v1, the
// SDK most servers in the field run) that serves what the server scenarios
// of the MCP conformance suite's requirement set 2025-11-25 ask for, the
// way a TypeScript server does it: its tools ask the client with
// extra.sendRequest (a request related to the call, sent on the call's own
// response stream), log and report progress with extra.sendNotification,
// its prompt arguments complete through completable(), and it takes
// resources/subscribe. TestConformanceThroughCrank (e2e/conformance_test.go)
// runs the suite against it directly and through Crank.
//
// Usage: node conformance-server.mjs            (stdio)
//        node conformance-server.mjs http PORT  (Streamable HTTP on
//                                                127.0.0.1:PORT/mcp, a
//                                                session per client)
// With CRANK_FIXTURE_ASK=standalone its tools ask the client with requests
// of the session (server.createMessage, server.elicitInput) that name no
// call: over Streamable HTTP they travel on the session's standalone GET
// stream.
import { McpServer, ResourceTemplate } from "@modelcontextprotocol/sdk/server/mcp.js";
import { completable } from "@modelcontextprotocol/sdk/server/completable.js";
import {
  CreateMessageResultSchema,
  ElicitResultSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { serve } from "./serve.mjs";
import { randomUUID } from "node:crypto";
import { z } from "zod";

const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
const wav = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";
const standalone = process.env.CRANK_FIXTURE_ASK === "standalone";
const pause = (ms) => new Promise((r) => setTimeout(r, ms));
const text = (t) => ({ content: [{ type: "text", text: t }] });

// The words prompt arguments complete from.
const words = ["paris", "park", "party", "test", "testing", "tested"];
const completeFrom = (value) => words.filter((w) => w.startsWith(value ?? ""));

function newServer() {
  const mcp = new McpServer(
    { name: "crank-ts-conformance-fixture", version: "1.0.0" },
    {
      capabilities: {
        tools: { listChanged: true },
        resources: { subscribe: true, listChanged: true },
        prompts: { listChanged: true },
        logging: {},
        completions: {},
      },
    },
  );
  const server = mcp.server;

  // ask sends a request to the client: related to the call (on its
  // stream) by default, or as the session's own.
  const ask = (extra, method, params, schema) => {
    if (!standalone) return extra.sendRequest({ method, params }, schema);
    return method === "sampling/createMessage" ? server.createMessage(params) : server.elicitInput(params);
  };

  mcp.registerTool("test_simple_text", { description: "Answers simple text." }, async () =>
    text("This is a simple text response for testing."));
  mcp.registerTool("test_image_content", { description: "Answers an image." }, async () => ({
    content: [{ type: "image", data: png, mimeType: "image/png" }],
  }));
  mcp.registerTool("test_audio_content", { description: "Answers audio." }, async () => ({
    content: [{ type: "audio", data: wav, mimeType: "audio/wav" }],
  }));
  mcp.registerTool("test_embedded_resource", { description: "Answers an embedded resource." }, async () => ({
    content: [{ type: "resource", resource: { uri: "test://embedded-resource", mimeType: "text/plain", text: "This is an embedded resource content." } }],
  }));
  mcp.registerTool("test_multiple_content_types", { description: "Answers text, an image and a resource." }, async () => ({
    content: [
      { type: "text", text: "Multiple content types test:" },
      { type: "image", data: png, mimeType: "image/png" },
      { type: "resource", resource: { uri: "test://mixed-content-resource", mimeType: "application/json", text: '{"test":"data","value":123}' } },
    ],
  }));
  mcp.registerTool("test_tool_with_logging", { description: "Logs three messages while it runs.", inputSchema: {} }, async (_args, extra) => {
    for (const [i, data] of ["Tool execution started", "Tool processing data", "Tool execution completed"].entries()) {
      if (i > 0) await pause(50);
      await extra.sendNotification({ method: "notifications/message", params: { level: "info", data } });
    }
    return text("Tool with logging executed successfully");
  });
  mcp.registerTool("test_tool_with_progress", { description: "Reports progress 0, 50 and 100 of 100.", inputSchema: {} }, async (_args, extra) => {
    const progressToken = extra._meta?.progressToken;
    for (const [i, progress] of [0, 50, 100].entries()) {
      if (i > 0) await pause(50);
      if (progressToken !== undefined) {
        await extra.sendNotification({ method: "notifications/progress", params: { progressToken, progress, total: 100 } });
      }
    }
    return text("Progress tool completed");
  });
  mcp.registerTool("test_error_handling", { description: "Always fails as a tool." }, async () => {
    throw new Error("This tool intentionally returns an error for testing");
  });
  mcp.registerTool("test_reconnection", { description: "Closes its SSE stream mid-call (SEP-1699).", inputSchema: {} }, async (_args, extra) => {
    extra.closeSSEStream?.();
    await pause(100);
    return text("Reconnection test completed successfully.");
  });
  mcp.registerTool("test_sampling", {
    description: "Asks the client's LLM (sampling/createMessage).",
    inputSchema: { prompt: z.string().describe("The prompt to send to the LLM") },
  }, async ({ prompt }, extra) => {
    try {
      const res = await ask(extra, "sampling/createMessage", {
        messages: [{ role: "user", content: { type: "text", text: prompt } }], maxTokens: 100,
      }, CreateMessageResultSchema);
      return text(`LLM response: ${res.content?.text ?? "(not text)"}`);
    } catch (err) {
      return { ...text(`Sampling not supported or error: ${err.message}`), isError: true };
    }
  });
  const elicitTool = (name, description, inputSchema, params) =>
    mcp.registerTool(name, { description, inputSchema }, async (args, extra) => {
      try {
        const res = await ask(extra, "elicitation/create", params(args), ElicitResultSchema);
        return text(`Elicitation completed: action=${res.action}, content=${JSON.stringify(res.content ?? {})}`);
      } catch (err) {
        return { ...text(`Elicitation not supported or error: ${err.message}`), isError: true };
      }
    });
  elicitTool("test_elicitation", "Asks the user for a username and email (elicitation/create).",
    { message: z.string().describe("The message to show the user") }, ({ message }) => ({
      mode: "form", message,
      requestedSchema: {
        type: "object", required: ["username", "email"],
        properties: {
          username: { type: "string", description: "User's response" },
          email: { type: "string", description: "User's email address" },
        },
      },
    }));
  elicitTool("test_elicitation_sep1034_defaults", "Elicits with a default for every primitive type (SEP-1034).", {}, () => ({
    mode: "form", message: "Please review your details",
    requestedSchema: {
      type: "object",
      properties: {
        name: { type: "string", default: "John Doe" },
        age: { type: "integer", default: 30 },
        score: { type: "number", default: 95.5 },
        status: { type: "string", enum: ["active", "inactive", "pending"], default: "active" },
        verified: { type: "boolean", default: true },
      },
    },
  }));
  const titled = (what) => ["First", "Second", "Third"].map((n, i) => ({ const: `value${i + 1}`, title: `${n} ${what}` }));
  const options = ["option1", "option2", "option3"];
  elicitTool("test_elicitation_sep1330_enums", "Elicits with the five enum forms (SEP-1330).", {}, () => ({
    mode: "form", message: "Please choose",
    requestedSchema: {
      type: "object",
      properties: {
        untitledSingle: { type: "string", enum: options },
        titledSingle: { type: "string", oneOf: titled("Option") },
        legacyEnum: { type: "string", enum: ["opt1", "opt2", "opt3"], enumNames: ["Option One", "Option Two", "Option Three"] },
        untitledMulti: { type: "array", items: { type: "string", enum: options } },
        titledMulti: { type: "array", items: { anyOf: titled("Choice") } },
      },
    },
  }));
  elicitTool("test_elicitation_url", "Asks the user to visit a URL (URL mode elicitation).",
    { url: z.string().describe("The URL to send the user to") }, ({ url }) => ({
      mode: "url", message: "Please sign in", url, elicitationId: randomUUID(),
    }));

  const read = (uri, mimeType, body) => ({ contents: [{ uri, mimeType, text: body }] });
  mcp.registerResource("static-text", "test://static-text", { description: "A static text resource.", mimeType: "text/plain" },
    async () => read("test://static-text", "text/plain", "This is the content of the static text resource."));
  mcp.registerResource("static-binary", "test://static-binary", { description: "A static binary resource (a PNG).", mimeType: "image/png" },
    async () => ({ contents: [{ uri: "test://static-binary", mimeType: "image/png", blob: png }] }));
  mcp.registerResource("watched-resource", "test://watched-resource", { description: "A resource to subscribe to.", mimeType: "text/plain" },
    async () => read("test://watched-resource", "text/plain", "Watched resource content"));
  mcp.registerResource("template", new ResourceTemplate("test://template/{id}/data", {
    list: undefined,
    complete: { id: (value) => ["123", "456"].filter((v) => v.startsWith(value ?? "")) },
  }), { description: "Data for an id.", mimeType: "application/json" }, async (uri, { id }) =>
    read(uri.href, "application/json", JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` })));

  // A subscription gets a notifications/resources/updated soon after.
  const subscribed = new Set();
  server.setRequestHandler(SubscribeRequestSchema, async (req) => {
    const { uri } = req.params;
    subscribed.add(uri);
    setTimeout(() => {
      if (subscribed.has(uri)) server.sendResourceUpdated({ uri }).catch(() => {});
    }, 50);
    return {};
  });
  server.setRequestHandler(UnsubscribeRequestSchema, async (req) => {
    subscribed.delete(req.params.uri);
    return {};
  });

  const user = (content) => ({ role: "user", content });
  mcp.registerPrompt("test_simple_prompt", { description: "A prompt without arguments." }, async () => ({
    messages: [user({ type: "text", text: "This is a simple prompt for testing." })],
  }));
  mcp.registerPrompt("test_prompt_with_arguments", {
    description: "A prompt with two arguments.",
    argsSchema: {
      arg1: completable(z.string().describe("First test argument"), completeFrom),
      arg2: completable(z.string().describe("Second test argument"), completeFrom),
    },
  }, async ({ arg1, arg2 }) => ({
    messages: [user({ type: "text", text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` })],
  }));
  mcp.registerPrompt("test_prompt_with_embedded_resource", {
    description: "A prompt embedding a resource.",
    argsSchema: { resourceUri: z.string().describe("URI of the resource to embed") },
  }, async ({ resourceUri }) => ({
    messages: [
      user({ type: "resource", resource: { uri: resourceUri, mimeType: "text/plain", text: "Embedded resource content for testing." } }),
      user({ type: "text", text: "Please process the embedded resource above." }),
    ],
  }));
  mcp.registerPrompt("test_prompt_with_image", { description: "A prompt with an image." }, async () => ({
    messages: [user({ type: "image", data: png, mimeType: "image/png" }), user({ type: "text", text: "Please analyze the image above." })],
  }));
  return mcp;
}

// memoryEventStore keeps every event of a session's streams for replay.
function memoryEventStore() {
  const events = [];
  return {
    async storeEvent(streamId, message) {
      const eventId = `${streamId}_${events.length}`;
      events.push({ eventId, streamId, message });
      return eventId;
    },
    async replayEventsAfter(lastEventId, { send }) {
      const at = events.findIndex((e) => e.eventId === lastEventId);
      if (at < 0) return "";
      const { streamId } = events[at];
      for (const e of events.slice(at + 1)) {
        if (e.streamId === streamId) await send(e.eventId, e.message);
      }
      return streamId;
    },
  };
}

// Over HTTP, a local server checks the Host of each request (DNS
// rebinding), and its streams are resumable (SEP-1699: each begins with a
// priming event, and a client may reconnect with Last-Event-ID).
await serve(newServer, (port) => ({
  eventStore: memoryEventStore(),
  retryInterval: 5000,
  enableDnsRebindingProtection: true,
  allowedHosts: [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`],
}));
