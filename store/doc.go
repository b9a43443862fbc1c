// Package store holds Crank's shared state — MCP sessions today; stream
// sessions, async jobs and the tool catalog later — behind the Store
// interface. Etcd is the only implementation; nothing above this package
// speaks etcd. StartEmbedded runs a single-member etcd in-process, and the
// storetest package starts one per test.
//
// # Key layout
//
// Every key lives under a prefix, DefaultPrefix ("/crank/v1/") unless
// configured; the "v1" names the layout and record schema, so an
// incompatible change moves to "/crank/v2/" instead of rewriting in place.
// Values are JSON records. IDs are path-escaped (url.PathEscape), so an ID
// containing "/" cannot reach into another namespace.
//
//	<prefix>mcp-sessions/<id>        MCP session record (id, protocol_version,
//	                                 client_name, client_version, created_at,
//	                                 ttl_ms), on a TTL-bucket lease
//	<prefix>ping                     never written; read by Ping
//
// Reserved for later work (same rules: one namespace per entity kind, JSON
// values, expiring entities on TTL-bucket leases):
//
//	<prefix>streams/<session>/<stream>             stream (SSE) metadata
//	<prefix>streams/<session>/<stream>/ev/<seq>    event log; <seq> zero-padded
//	                                               so that key order is event
//	                                               order for range reads
//	<prefix>jobs/<id>                              async job / MCP task record
//	<prefix>catalog/<adapter>/<tool>               tool catalog (no lease)
//
// # Lease scheme
//
// Entities do not get a lease each: lease operations are expensive for etcd
// and mass revocation of many leases is rate limited. Instead a lease
// manager per Etcd shares one lease per TTL bucket:
//
//	W (window)  = clamp(ceil_s(TTL/10), 1s, 10m)
//	R (bucket)  = TTL rounded up to a multiple of W
//	lease TTL   = R + W
//
// The bucket for R hands out its lease for W after the grant (measured
// before the grant request is sent), then grants a new one on the next
// demand. An entity put (or touched) at time t on a lease granted at g,
// g <= t < g+W, therefore expires no earlier than t+TTL and no later than
// about t+TTL+2W (2W is about TTL/5, at least 2s and at most 20m), plus
// etcd's own expiry latency (its revocation loop runs every 500ms). Caveats
// that lengthen a lease beyond that bound are etcd's: a leader change renews
// every lease to its full TTL, and etcd raises TTLs below its minimum
// (about 2s with default election settings) to that minimum. A bucket has at
// most about 2 + R/W ≈ 12 live leases, and grants at most one lease per W,
// however many entities it holds; old leases are never revoked — they expire
// together with the entities still attached to them.
//
// Touching re-puts the entity onto the current bucket lease with a
// compare-and-swap on its mod revision (so a concurrent delete is never
// undone); when the entity is already on the current bucket lease, a touch
// is a single read. Grants within a bucket are serialised, so a burst of
// puts grants one lease. When etcd reports a bucket lease as not found
// (revoked or expired behind our back), the manager grants a fresh one and
// retries the operation once.
//
// Entities that belong to a parent (e.g. a stream's events) must take their
// own lease from the same manager with the parent's TTL and be re-put or
// cleaned up with it: a lease is not a parent pointer, because touching the
// parent moves it to a newer lease.
//
// Close does not revoke leases: entries outlive the process and stay
// visible to other replicas until they expire.
package store
