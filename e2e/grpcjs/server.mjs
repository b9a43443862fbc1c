// A gRPC server as Node projects write one: @grpc/grpc-js, the service
// loaded from inventory.proto by @grpc/proto-loader, and server reflection
// by @grpc/reflection. It listens on a free loopback port, prints
// {"port":N} and serves until its stdin closes.
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { ReflectionService } from "@grpc/reflection";

const here = dirname(fileURLToPath(import.meta.url));
const def = protoLoader.loadSync(join(here, "inventory.proto"), { longs: String, enums: String, defaults: true, oneofs: true });
const pkg = grpc.loadPackageDefinition(def);

const items = new Map([["i-1", {
  id: "i-1", kind: "KIND_TOOL", stockBySite: { berlin: 3, lyon: 0 }, dimensions: { width: { value: 1.5, unit: "cm" } },
  updatedAt: { seconds: "1700000000", nanos: 0 }, note: { value: "fragile" }, checksum: Buffer.from("crank"), tags: ["a", "b"], cents: "1999",
}]]);

const server = new grpc.Server();
server.addService(pkg.crank.js.v1.Inventory.service, {
  GetItem(call, cb) {
    const it = items.get(call.request.id);
    if (!it) return cb({ code: grpc.status.NOT_FOUND, details: `no item ${call.request.id}` });
    cb(null, it);
  },
  PutItem(call, cb) {
    items.set(call.request.id, call.request);
    cb(null, call.request);
  },
});
new ReflectionService(def).addToServer(server);
server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, port) => {
  if (err) throw err;
  process.stdout.write(JSON.stringify({ port }) + "\n");
});
process.stdin.resume();
process.stdin.on("end", () => server.tryShutdown(() => process.exit(0)));
