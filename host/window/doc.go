// Package window is the window engine: what a window, a session's
// upstream reader or an async_job's window makes of the documents its
// upstream sends (stream events or poll answers), with no upstream of its
// own. Its config ([Config]: limits, aggregation, safety, transport
// behaviour, the compiled queries) is what the operations file (package
// opsfile) validates an entry's blocks into; its [Collector] applies the
// safety layer to every item (redacted_paths, the secrets of the call
// before max_field_length cuts a string, duplicates, sampling), enforces
// max_items and max_bytes, tracks where the next window starts and
// aggregates (raw_items, summary_only, summary_plus_samples, stats,
// latest_state, text) into one bounded [Result], which [OutputSchema]
// describes. The runtime (package host) opens the upstream, feeds the
// collector, cuts the upstream off when it says so and seals the cursor
// it hands out.
//
// It neither parses files nor runs calls.
package window
