// Package ratelimit is Crank's rate limits: token buckets with a rate
// and a burst, keyed by who calls (nobody, the workspace, the user, the
// agent, the client or the client's address) and scoped to what is
// called (the endpoint, a tool, a family, a toolset of the endpoint's
// view, the tools of an upstream). Several limits may apply to one call,
// and all must pass.
//
// A limit is declared once, as [Limit]: its tags drive its decoding in
// operations files and catalogs (sdk.Decode, every problem at once), its
// Caddyfile subdirectives (configblock), the JSON Schema the admin API
// publishes and the console's form is built from ([Schema]), and the
// reference in docs/reference/rate-limit.md. [Limit.Check] names the field of each problem.
//
// A limit's state is a [Budget]: the buckets of its keys. [Budgets] keeps
// the budgets of a process by the limit's definition, so that handlers
// declaring the same limit share it and a reload keeps it. A limit with
// fleet set holds across the replicas of a fleet without a store write per
// call: each replica enforces its share of the rate and burst, 1/n for n
// replicas enforcing the limit, and n comes from the store (a [Fleet]):
// every replica that enforces a fleet-wide limit holds a key on its owner
// lease, and a watch on those keys recomputes the shares as replicas come
// and go. The tolerance this gives is stated in docs/security.md ("Rate
// limits") and measured by e2e's TestFleetRateLimit.
//
// A refused call is a [*Refusal]: the limit's name and scope, and when
// the caller may try again. The MCP endpoint answers it as a JSON-RPC
// error of code [CodeRateLimited] whose data carries them, or, for a
// request refused before it is read, HTTP 429 with Retry-After.
//
// The package is Caddy-free and speaks no etcd: the store implements
// Fleet.
package ratelimit
