#!/usr/bin/env node
// An MCP server built with the official TypeScript SDK v2's McpServer
// (@modelcontextprotocol/server, the SDK of the 2026-07-28 revision) whose
// tools ask their client the write-once way of that SDK: they answer an
// input-required result (SEP-2322) until the retry carries the client's
// answer. The SDK serves them in both generations: to a client of
// 2026-07-28 as input-required results, to a 2025-era session by sending
// the client requests of its own during the call (its legacy shim).
//
// Usage: node ask-server-v2.mjs            (stdio, either generation)
//        node ask-server-v2.mjs http PORT  (Streamable HTTP on
//                                           127.0.0.1:PORT/mcp: 2026-07-28
//                                           requests sessionless, 2025-era
//                                           ones on a session each)
//
// Tools (each answers "<kind>: <what the client answered>"):
//   ask_form    elicits {name} in form mode ("form: <name>")
//   ask_url     elicits in URL mode ("url: <action>")
//   ask_sample  samples "<prompt>" ("sample: <text>")
import {
  McpServer,
  acceptedContent,
  createMcpHandler,
  inputRequired,
  inputResponse,
  isLegacyRequest,
} from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";
import { NodeStreamableHTTPServerTransport, toNodeHandler, toWebRequest } from "@modelcontextprotocol/node";
import { createServer } from "node:http";
import { randomUUID } from "node:crypto";
import { z } from "zod";

const text = (t) => ({ content: [{ type: "text", text: t }] });

function newServer() {
  const mcp = new McpServer({ name: "crank-ts-v2-ask-fixture", version: "1.0.0" });
  mcp.registerTool("ask_form", {
    description: "Asks the user for a name (form mode elicitation).",
    inputSchema: z.object({ message: z.string().optional() }),
  }, async ({ message }, ctx) => {
    const answer = acceptedContent(ctx.mcpReq.inputResponses, "name");
    if (answer) return text(`form: ${answer.name}`);
    return inputRequired({
      inputRequests: {
        name: inputRequired.elicit({
          message: message ?? "What is your name?",
          requestedSchema: { type: "object", properties: { name: { type: "string" } }, required: ["name"] },
        }),
      },
    });
  });
  mcp.registerTool("ask_url", {
    description: "Sends the user to a URL (URL mode elicitation).",
    inputSchema: z.object({ url: z.string() }),
  }, async ({ url }, ctx) => {
    const r = inputResponse(ctx.mcpReq.inputResponses, "visit");
    if (r.kind === "elicit") return text(`url: ${r.action}`);
    return inputRequired({ inputRequests: { visit: inputRequired.elicitUrl({ message: "Please sign in", url }) } });
  });
  mcp.registerTool("ask_sample", {
    description: "Asks the client's LLM (sampling).",
    inputSchema: z.object({ prompt: z.string() }),
  }, async ({ prompt }, ctx) => {
    const r = inputResponse(ctx.mcpReq.inputResponses, "llm");
    if (r.kind === "sampling") {
      const c = r.result.content;
      return text(`sample: ${Array.isArray(c) ? c.map((b) => b.text).join("") : c?.text}`);
    }
    return inputRequired({
      inputRequests: {
        llm: inputRequired.createMessage({ messages: [{ role: "user", content: { type: "text", text: prompt } }], maxTokens: 50 }),
      },
    });
  });
  return mcp;
}

if (process.argv[2] === "http") {
  const modern = toNodeHandler(createMcpHandler(newServer, { legacy: "reject" }));
  const sessions = new Map();
  createServer(async (req, res) => {
    // The body is read once, parsed, and handed to whichever leg serves it.
    let body;
    if (req.method === "POST") {
      const chunks = [];
      for await (const c of req) chunks.push(c);
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      } catch {
        body = undefined;
      }
    }
    if (!(await isLegacyRequest(await toWebRequest(req, body), body))) {
      await modern(req, res, body);
      return;
    }
    const sid = req.headers["mcp-session-id"];
    let transport = sid ? sessions.get(sid) : undefined;
    if (!transport) {
      if (sid) {
        res.writeHead(404, { "Content-Type": "application/json" }).end('{"jsonrpc":"2.0","error":{"code":-32001,"message":"Session not found"},"id":null}');
        return;
      }
      transport = new NodeStreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => sessions.set(id, transport),
      });
      transport.onclose = () => sessions.delete(transport.sessionId);
      await newServer().connect(transport);
    }
    await transport.handleRequest(req, res, body);
  }).listen(Number(process.argv[3]), "127.0.0.1");
} else {
  serveStdio(newServer); // the era of the connection's opening
}
