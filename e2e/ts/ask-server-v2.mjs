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
// and the tools and prompt of the conformance suite's input-required-result
// scenarios (2026-07-28, SEP-2322), for TestConformanceThroughCrank: each
// answers input-required until the retry carries what it asked for, with
// an HMAC-protected requestState where it keeps one.
import {
  McpServer,
  ProtocolError,
  ProtocolErrorCode,
  acceptedContent,
  createMcpHandler,
  inputRequired,
  inputResponse,
  isLegacyRequest,
} from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";
import { NodeStreamableHTTPServerTransport, toNodeHandler, toWebRequest } from "@modelcontextprotocol/node";
import { createServer } from "node:http";
import { createHmac, randomBytes, randomUUID, timingSafeEqual } from "node:crypto";
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
  mrtrTools(mcp);
  return mcp;
}

// The requestState of the MRTR tools: a payload and its HMAC under a key
// of this process, so that a tampered or foreign state fails.
const stateKey = randomBytes(32);
const mac = (payload) => createHmac("sha256", stateKey).update(payload).digest("base64url");
const mint = (payload) => `${Buffer.from(payload).toString("base64url")}.${mac(payload)}`;
function open(state) {
  const [p, sig] = String(state).split(".");
  const payload = Buffer.from(p ?? "", "base64url").toString();
  const want = Buffer.from(mac(payload));
  if (!sig || want.length !== Buffer.from(sig).length || !timingSafeEqual(want, Buffer.from(sig))) {
    throw new ProtocolError(ProtocolErrorCode.InvalidParams, "requestState failed its integrity check");
  }
  return payload;
}
const elicitOne = (message, field, type) =>
  inputRequired.elicit({ message, requestedSchema: { type: "object", properties: { [field]: { type } }, required: [field] } });
const sampleOne = (prompt, maxTokens) =>
  inputRequired.createMessage({ messages: [{ role: "user", content: { type: "text", text: prompt } }], maxTokens });
const sampled = (responses, key) => {
  const r = inputResponse(responses, key);
  if (r.kind !== "sampling") return undefined;
  const c = r.result.content;
  return (Array.isArray(c) ? c : [c]).find((b) => b?.type === "text")?.text ?? "(not text)";
};
const rootsOf = (responses, key) => {
  const r = inputResponse(responses, key);
  return r.kind === "roots" ? r.roots : undefined;
};

function mrtrTools(mcp) {
  const tool = (name, description, handler) => mcp.registerTool(name, { description, inputSchema: z.object({}).passthrough() }, (_args, ctx) => handler(ctx));
  tool("test_input_required_result_elicitation", "Asks for the caller's name (input-required elicitation).", (ctx) => {
    const name = acceptedContent(ctx.mcpReq.inputResponses, "user_name")?.name;
    if (name) return text(`Hello, ${name}!`);
    return inputRequired({ inputRequests: { user_name: elicitOne("What is your name?", "name", "string") } });
  });
  tool("test_input_required_result_sampling", "Asks the client's LLM (input-required sampling).", (ctx) => {
    const said = sampled(ctx.mcpReq.inputResponses, "capital_question");
    if (said !== undefined) return text(`Sampling response: ${said}`);
    return inputRequired({ inputRequests: { capital_question: sampleOne("What is the capital of France?", 100) } });
  });
  tool("test_input_required_result_list_roots", "Asks for the client's roots (input-required roots/list).", (ctx) => {
    const roots = rootsOf(ctx.mcpReq.inputResponses, "client_roots");
    if (roots) return text(`Client roots (${roots.length}): ${roots.map((r) => r.uri).join(", ")}`);
    return inputRequired({ inputRequests: { client_roots: inputRequired.listRoots() } });
  });
  const confirm = (name) => (ctx) => {
    const state = ctx.mcpReq.requestState();
    if (state !== undefined) {
      open(state);
      if (acceptedContent(ctx.mcpReq.inputResponses, "confirm")) return text("state-ok: the requestState was valid and the confirmation accepted");
    }
    return inputRequired({ inputRequests: { confirm: elicitOne("Please confirm", "ok", "boolean") }, requestState: mint(name) });
  };
  tool("test_input_required_result_request_state", "Round-trips a signed requestState.", confirm("request_state"));
  tool("test_input_required_result_tampered_state", "Rejects a tampered requestState.", confirm("tampered_state"));
  tool("test_input_required_result_multiple_inputs", "Asks for elicitation, sampling and roots at once.", (ctx) => {
    const state = ctx.mcpReq.requestState();
    if (state !== undefined) {
      open(state);
      const responses = ctx.mcpReq.inputResponses;
      const name = acceptedContent(responses, "user_name")?.name;
      const greeting = sampled(responses, "greeting");
      const roots = rootsOf(responses, "client_roots");
      if (name && greeting !== undefined && roots) return text(`${greeting} ${name}, with ${roots.length} root(s)`);
    }
    return inputRequired({
      inputRequests: {
        user_name: elicitOne("What is your name?", "name", "string"),
        greeting: sampleOne("Generate a greeting", 50),
        client_roots: inputRequired.listRoots(),
      },
      requestState: mint("multiple_inputs"),
    });
  });
  tool("test_input_required_result_multi_round", "Asks twice, carrying the first answer in requestState.", (ctx) => {
    const round1 = () => inputRequired({ inputRequests: { step1: elicitOne("Step 1: What is your name?", "name", "string") }, requestState: mint("round=1") });
    const step2 = (state) => inputRequired({ inputRequests: { step2: elicitOne("Step 2: What is your favorite color?", "color", "string") }, requestState: state });
    const raw = ctx.mcpReq.requestState();
    if (raw === undefined) return round1();
    const state = open(raw);
    const responses = ctx.mcpReq.inputResponses;
    if (state === "round=1") {
      const name = acceptedContent(responses, "step1")?.name;
      return name ? step2(mint(`round=2;name=${name}`)) : round1();
    }
    const color = acceptedContent(responses, "step2")?.color;
    if (!color) return step2(raw);
    return text(`Multi-round complete: ${state.replace("round=2;name=", "")} likes ${color}`);
  });
  tool("test_input_required_result_capabilities", "Asks only for the input kinds the client declared.", (ctx) => {
    if (Object.keys(ctx.mcpReq.inputResponses ?? {}).length > 0) return text("Capability-aware input requests fulfilled");
    const caps = ctx.mcpReq.envelope?.["io.modelcontextprotocol/clientCapabilities"] ?? {};
    const inputRequests = {};
    if (caps.elicitation) inputRequests.user_name = elicitOne("What is your name?", "name", "string");
    if (caps.sampling) inputRequests.greeting = sampleOne("Generate a short greeting", 50);
    if (caps.roots) inputRequests.client_roots = inputRequired.listRoots();
    if (Object.keys(inputRequests).length === 0) return text("The client declared no capability to ask with");
    return inputRequired({ inputRequests });
  });
  mcp.registerPrompt("test_input_required_result_prompt", { description: "Asks for context before it renders (input-required)." }, (ctx) => {
    const context = acceptedContent(ctx.mcpReq.inputResponses, "user_context")?.context;
    if (context) return { messages: [{ role: "user", content: { type: "text", text: `Context: ${context}` } }] };
    return inputRequired({ inputRequests: { user_context: elicitOne("What context should the prompt use?", "context", "string") } });
  });
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
