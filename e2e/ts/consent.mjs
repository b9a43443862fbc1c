// A TypeScript MCP SDK v2 client of a tool that acts as its user at an
// upstream (Crank's upstream_auth authorization_code): it declares URL-mode
// elicitation, calls the tool once and reports, one JSON document a line
// on stdout, each URL elicitation it is sent ({"elicit": {...}}), each
// notifications/elicitation/complete ({"complete": id}) and the call's
// result ({"result": {...}} or {"error": {...}}).
//
//   node consent.mjs <url> <bearer token> <tool> <arguments JSON> <era>
//
// era is 2026 (the client pins protocol 2026-07-28: the consent comes as
// an input_required result, which the SDK fulfils through the same
// elicitation handler and retries) or 2025 (an MCP session of 2025-11-25:
// the consent comes as an elicitation/create request during the call).
// The handler accepts at once: the user opens the link in a browser, and
// the call returns once the consent is done.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const [url, token, tool, args, era] = process.argv.slice(2);
const out = (v) => process.stdout.write(JSON.stringify(v) + '\n');

const client = new Client(
    { name: 'crank-e2e-tsv2', version: '0.0.0' },
    {
        capabilities: { elicitation: { url: {} } },
        ...(era === '2026' ? { versionNegotiation: { mode: { pin: '2026-07-28' } } } : {})
    }
);
client.setRequestHandler('elicitation/create', async (request) => {
    const p = request.params;
    out({ elicit: { mode: p.mode, url: p.url, elicitationId: p.elicitationId, message: p.message } });
    return { action: 'accept' };
});
client.setNotificationHandler('notifications/elicitation/complete', (n) => out({ complete: n.params.elicitationId }));

const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } }
});
try {
    await client.connect(transport);
    const result = await client.callTool({ name: tool, arguments: JSON.parse(args) }, { timeout: 120000 });
    out({ result, protocolVersion: transport.protocolVersion ?? null });
} catch (e) {
    out({ error: { message: String(e && e.message), code: e && e.code } });
}
await client.close().catch(() => {});
process.exit(0);
