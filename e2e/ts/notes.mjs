// A user of the demo's /notes endpoint (`make run`), through the
// TypeScript MCP SDK v2 client (@modelcontextprotocol/client): the SDK
// signs the user in at the endpoint's authorization server (the demo
// notes service: its metadata, RFC 7591 registration, PKCE, the RFC 8707
// resource) — this program prints the sign-in link and catches the
// browser's redirect on a loopback port of its own —, then, declaring
// URL-mode elicitation, calls the tools of the steps in order.
//
//   node notes.mjs <endpoint URL> '<steps JSON>'
//
// A step is {"tool": "<name>", "arguments": {...}} (a call), or
// {"wait": true} (waits for a line on stdin). stdout has one JSON document
// a line: {"signin": <url>} (open it in a browser and sign in),
// {"elicit": {...}} for each URL elicitation (a consent link: open it),
// {"complete": <id>}, then per call {"result": {...}} or {"error": {...}},
// and {"done": true}.
import { createServer } from 'node:http';
import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import { Client, StreamableHTTPClientTransport, UnauthorizedError } from '@modelcontextprotocol/client';

const [endpoint, stepsJSON] = process.argv.slice(2);
if (!endpoint || !stepsJSON) {
    process.stderr.write("usage: node notes.mjs <endpoint URL> '<steps JSON>'\n");
    process.exit(2);
}
const steps = JSON.parse(stepsJSON);
const out = (v) => process.stdout.write(JSON.stringify(v) + '\n');
const stdin = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

// The redirect URI: a loopback port of this program's own.
let signedIn;
const callback = new Promise((resolve) => (signedIn = resolve));
const server = createServer((req, res) => {
    const u = new URL(req.url, 'http://127.0.0.1');
    if (u.pathname !== '/callback') {
        res.writeHead(404).end();
        return;
    }
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
    res.end('<!doctype html><title>Signed in</title><h1 id="signedin">Signed in</h1><p>Return to your terminal.</p>');
    signedIn(u.searchParams);
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const redirectUrl = `http://127.0.0.1:${server.address().port}/callback`;

// What the SDK keeps of the sign-in, in memory.
class Provider {
    get redirectUrl() {
        return redirectUrl;
    }
    get clientMetadata() {
        return {
            client_name: 'crank-notes-demo',
            redirect_uris: [redirectUrl],
            grant_types: ['authorization_code', 'refresh_token'],
            response_types: ['code'],
            token_endpoint_auth_method: 'none'
        };
    }
    state() {
        this._state = randomUUID();
        return this._state;
    }
    clientInformation() {
        return this._client;
    }
    saveClientInformation(c) {
        this._client = c;
    }
    tokens() {
        return this._tokens;
    }
    saveTokens(t) {
        this._tokens = t;
    }
    redirectToAuthorization(url) {
        out({ signin: url.toString() });
    }
    saveCodeVerifier(v) {
        this._verifier = v;
    }
    codeVerifier() {
        return this._verifier;
    }
}
const provider = new Provider();

function connect() {
    const client = new Client({ name: 'crank-notes-demo', version: '0.0.0' }, { capabilities: { elicitation: { url: {} } } });
    client.setRequestHandler('elicitation/create', async (request) => {
        const p = request.params;
        out({ elicit: { mode: p.mode, url: p.url, elicitationId: p.elicitationId, message: p.message } });
        return { action: 'accept' };
    });
    client.setNotificationHandler('notifications/elicitation/complete', (n) => out({ complete: n.params.elicitationId }));
    const transport = new StreamableHTTPClientTransport(new URL(endpoint), { authProvider: provider });
    return { client, transport };
}

let code = 0;
let { client, transport } = connect();
try {
    try {
        await client.connect(transport);
    } catch (e) {
        if (!(e instanceof UnauthorizedError)) throw e;
        const params = await callback;
        if (params.get('state') !== provider._state) throw new Error('the sign-in came back with another state');
        await transport.finishAuth(params);
        ({ client, transport } = connect());
        await client.connect(transport);
    }
    for (const step of steps) {
        if (step.wait) {
            await stdin.next();
            continue;
        }
        try {
            const result = await client.callTool({ name: step.tool, arguments: step.arguments ?? {} }, { timeout: 120000 });
            out({ result });
        } catch (e) {
            out({ error: { message: String(e && e.message), code: e && e.code } });
        }
    }
    out({ done: true });
} catch (e) {
    out({ error: { message: String(e && e.message), code: e && e.code } });
    code = 1;
}
await client.close().catch(() => {});
server.close();
process.exit(code);
