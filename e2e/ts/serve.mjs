// serve runs an MCP server of the official TypeScript SDK the way the
// test fixtures of this directory are started: over stdio, or, with the
// arguments "http PORT", over Streamable HTTP on 127.0.0.1:PORT/mcp, a
// server (newServer()) and transport per session. options are the
// transport's own (an event store, DNS rebinding protection) besides the
// session id generator.
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { createServer } from "node:http";
import { randomUUID } from "node:crypto";

export async function serve(newServer, options = () => ({})) {
  if (process.argv[2] !== "http") {
    await newServer().connect(new StdioServerTransport());
    return;
  }
  const port = Number(process.argv[3]);
  const transports = new Map();
  createServer(async (req, res) => {
    const sid = req.headers["mcp-session-id"];
    let transport = sid ? transports.get(sid) : undefined;
    if (!transport) {
      if (sid) {
        res.writeHead(404, { "Content-Type": "application/json" }).end('{"jsonrpc":"2.0","error":{"code":-32001,"message":"Session not found"},"id":null}');
        return;
      }
      transport = new StreamableHTTPServerTransport({
        ...options(port),
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => transports.set(id, transport),
      });
      transport.onclose = () => transports.delete(transport.sessionId);
      await newServer().connect(transport);
    }
    await transport.handleRequest(req, res);
  }).listen(port, "127.0.0.1");
}
