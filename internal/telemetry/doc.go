// Package telemetry holds Crank's Prometheus collectors and its
// OpenTelemetry tracer, for the code that records them (host,
// host/mcpserver, store) without importing Caddy.
//
// Metrics: the collectors are created once per process, here, and keep
// their values for its whole life; caddymodule registers them into the
// registry of every config Caddy loads (Register, which ignores a
// collector the registry already has), so a config reload neither resets
// nor duplicates a series. Labels are bounded by construction: tool and
// operation names come from the configuration (ToolLabel caps how many
// distinct ones become labels), methods, modes, outcomes, statuses and
// reasons are closed sets, and no session, job, agent or request id, nor
// any argument value, is ever a label. SetMetricsEnabled(false) turns the
// recording off.
//
// Traces: Tracer is a no-op until ConfigureTracing installs a provider
// (the crank app's tracing block); spans then go to an OTLP collector. A
// no-op tracer still carries the caller's trace context through, so
// upstreams see the client's traceparent either way. Adapters record
// their own spans through the SDK (plugins/sdk) and hand them back with
// their answers; ExportAdapterSpans exports them as the adapter's.
//
// docs/observability.md lists every metric and span.
package telemetry
