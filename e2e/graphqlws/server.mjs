#!/usr/bin/env node
// A reference GraphQL subscription server for Crank's end-to-end tests:
// graphql-js with graphql-ws (the graphql-transport-ws protocol, over ws)
// at ws://127.0.0.1:PORT/graphql and graphql-sse (GraphQL over SSE) at
// http://127.0.0.1:PORT/graphql/stream, all pinned in package.json;
// queries (introspection) are POSTs to http://127.0.0.1:PORT/graphql.
//
// Usage: node server.mjs   — prints {"port":N} on its first stdout line
// and serves until stdin closes (the Go test ends it that way).
//
// Subscription:
//   ticks(every: Int = 20): Tick!   endless, a tick every `every` ms
//   countdown(from: Int!): Tick!    from..1, then complete
//   flaky: Tick!                    endless; tick 2's label fails (a
//                                   next with data and errors)
//   broken: Tick!                   one tick, then the source throws (an
//                                   error message mid-stream)
// A countdown from a negative number is refused (onSubscribe: an error
// message over the WebSocket, a GraphQL error answer over SSE).
// The WebSocket wants connection_init {"token":"s3cret"} (else 4403
// Forbidden); SSE wants Authorization: Bearer s3cret (else 401 with a
// GraphQL error body).
import http from 'node:http';
import { WebSocketServer } from 'ws';
import { useServer } from 'graphql-ws/use/ws';
import { createHandler } from 'graphql-sse/lib/use/http';
import { buildSchema, execute, subscribe, graphql, GraphQLError } from 'graphql';

const schema = buildSchema(`
  type Query { hello: String }
  type Tick { n: Int! label: String }
  type Subscription {
    ticks(every: Int = 20): Tick!
    countdown(from: Int!): Tick!
    flaky: Tick!
    broken: Tick!
  }
`);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const roots = {
  hello: () => 'world',
  ticks: async function* ({ every }) {
    for (let n = 1; ; n++) {
      await sleep(every);
      yield { ticks: { n, label: `tick ${n}` } };
    }
  },
  countdown: async function* ({ from }) {
    for (let n = from; n >= 1; n--) {
      yield { countdown: { n, label: `tick ${n}` } };
    }
  },
  broken: async function* () {
    yield { broken: { n: 1, label: 'tick 1' } };
    await sleep(10);
    throw new Error('the feed broke');
  },
  flaky: async function* () {
    yield { flaky: { n: 1, label: 'tick 1' } };
    yield { flaky: { n: 2, label: () => { throw new Error('label service down'); } } };
    for (let n = 3; ; n++) {
      await sleep(20);
      yield { flaky: { n, label: `tick ${n}` } };
    }
  },
};

// refuse refuses a countdown from a negative number before it runs.
const refuse = (variables) =>
  typeof variables?.from === 'number' && variables.from < 0 ? [new GraphQLError('from must not be negative', { extensions: { code: 'BAD_USER_INPUT' } })] : undefined;

const server = http.createServer();
const sse = createHandler({
  schema,
  execute: (args) => execute({ ...args, rootValue: roots }),
  subscribe: (args) => subscribe({ ...args, rootValue: roots }),
  onSubscribe: (req, params) => {
    const errors = refuse(params.variables);
    if (errors) return [JSON.stringify({ errors: errors.map((e) => e.toJSON()) }), { status: 400, statusText: 'Bad Request', headers: { 'content-type': 'application/json' } }];
  },
});
server.on('request', async (req, res) => {
  if (req.url === '/graphql' && req.method === 'POST') {
    // Queries (the gateway's introspection at load).
    let body = '';
    for await (const chunk of req) body += chunk;
    const { query, variables, operationName } = JSON.parse(body);
    const result = await graphql({ schema, source: query, variableValues: variables, operationName, rootValue: roots });
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(result));
    return;
  }
  if (!req.url.startsWith('/graphql/stream')) {
    res.writeHead(404).end();
    return;
  }
  if (req.headers.authorization !== 'Bearer s3cret') {
    res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ errors: [{ message: 'unauthorized', extensions: { code: 'UNAUTHENTICATED' } }] }));
    return;
  }
  sse(req, res);
});

const wss = new WebSocketServer({ server, path: '/graphql' });
useServer(
  {
    schema,
    roots: { subscription: roots, query: roots },
    onConnect: (ctx) => ctx.connectionParams?.token === 's3cret',
    onSubscribe: (ctx, id, payload) => refuse(payload.variables),
  },
  wss,
);

server.listen(0, '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ port: server.address().port }) + '\n');
});
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
