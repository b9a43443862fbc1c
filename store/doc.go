// Package store holds Crank's shared state — MCP sessions, SSE event logs,
// stream sessions, async jobs and operations catalogs — in etcd, so
// that any replica can serve any of them and a replica can die without
// losing them. Etcd (NewEtcd) is the store; nothing above this package
// speaks etcd. The packages that use it declare the few methods they need
// as small interfaces of their own (host: stream sessions, jobs, signals;
// host/mcpserver: MCP sessions and event logs), so a test can put a fake or a
// wrapper in front of any one of them. StartEmbedded runs a single-member
// etcd in-process (loopback only, TLS with a client certificate it makes
// in its data directory: see EmbeddedConfig), and the storetest package starts one per test (and
// restartable ones, and extra replicas on the same server).
//
// # Key layout
//
// Every key lives under a prefix, DefaultPrefix ("/crank/v1/") unless
// configured; the "v1" names the layout and record schema, so an
// incompatible change moves to "/crank/v2/" instead of rewriting in place.
// Values are JSON records (fields may be added; readers ignore unknown ones
// and old records lack new ones), each with its format version as its
// first member, "v" (absent: format 1), written in the newest format every
// live replica reads (format.go: the rolling-upgrade rule). A value read back that is not a record of
// its key — not JSON, naming another entity's ID, an unknown status,
// negative bounds, an impossible event span — is an error naming the key,
// never acted upon (FuzzRecordDecoding). MCP session IDs come from clients and are
// path-escaped (url.PathEscape), so an ID containing "/" cannot reach into
// another namespace; the store's own IDs (ss_…, job_…, own_…) are checked
// against their format before any key is built from them.
//
//	<prefix>mcp-sessions/<id>           MCP session state (negotiated
//	                                    protocol version, client info and
//	                                    capabilities, initialize params, log
//	                                    level, workspace/agent), on a
//	                                    TTL-bucket lease of the session TTL
//	<prefix>stream-sessions/<id>        stream session record on a
//	                                    TTL-bucket lease until its ExpiresAt
//	<prefix>stream-items/<id>/<seq>     a session's buffered items, <seq> a
//	                                    20-digit zero-padded item number so
//	                                    key order is item order; on a
//	                                    TTL-bucket lease until the session's
//	                                    hard deadline (created + max lifetime
//	                                    + retention)
//	<prefix>jobs/<id>                   async job record on a
//	                                    TTL-bucket lease until its ExpiresAt
//	<prefix>job-results/<id>            a job's result (result_json), on the
//	                                    record's lease, written with the
//	                                    record (which names its size) and
//	                                    deleted with it; read by
//	                                    GetJobResult only
//	<prefix>job-list/<ws>/workspace/<t>/<id>
//	<prefix>job-list/<ws>/agent/<agent>/<t>/<id>
//	                                    one empty key per job, visible to
//	                                    its workspace or to one agent of it,
//	                                    in ListJobs' order: <t> is the
//	                                    19-digit math.MaxInt64 minus the
//	                                    creation time in Unix nanoseconds,
//	                                    so keys sort newest first; on the
//	                                    record's lease, deleted with it
//	<prefix>active/sessions/<ws>/<agent>/<id>
//	<prefix>active/jobs/<ws>/<agent>/<id>
//	                                    one empty key per open (not final)
//	                                    session or job, workspace and agent
//	                                    path-escaped: what quotas count; on
//	                                    the record's lease, deleted with the
//	                                    transition to a final status
//	<prefix>active-client/<kind>/<ws>/<client>/<id>
//	                                    the same per client, for a record
//	                                    that names its client (client_id):
//	                                    what per-client quotas count
//	<prefix>retained/jobs/<ws>/<agent>/<t>/<id>
//	<prefix>retained-client/jobs/<ws>/<client>/<t>/<id>
//	                                    one key per finished job (the second
//	                                    for one that names its client), <t>
//	                                    its 19-digit finish time in Unix
//	                                    nanoseconds (oldest first), its value
//	                                    the job's expiry (empty before this
//	                                    release); on the record's lease,
//	                                    deleted with it or when it is evicted
//	<prefix>retained-bytes/64k/<ws>/<agent>/<id>/<k>
//	<prefix>retained-bytes/4k/<ws>/<agent>/<id>/<k>
//	<prefix>retained-client-bytes/64k|4k/<ws>/<client>/<id>/<k>
//	                                    one empty key per whole 64 KiB of a
//	                                    finished job's bytes, then per 4 KiB
//	                                    of the rest: the byte budgets; on
//	                                    the record's lease, kept when the
//	                                    job is evicted (retained.go)
//	<prefix>evicted/jobs/<id>           why a job was evicted early, until
//	                                    it would have expired
//	<prefix>signals/sessions/<id>       a pending stop (cancel) request of a
//	<prefix>signals/jobs/<id>           running session (job), for its runner:
//	                                    written with the request, deleted
//	                                    when the entity finishes; every
//	                                    replica watches signals/ once
//	                                    (WatchSignals)
//	<prefix>running/sessions/<id>       owner ID of a running session or job:
//	<prefix>running/jobs/<id>           the index the sweeper scans; on a
//	                                    lease until the entity's hard deadline
//	<prefix>owners/<owner-id>           a replica's owner registration, on its
//	                                    own kept-alive lease
//	<prefix>sweep-leader/<lease>        the sweep-leader lock (an etcd
//	                                    concurrency.Mutex) of the replica
//	                                    that runs expiry cleanups: a key
//	                                    named by its owner lease ID in hex,
//	                                    on that lease
//	<prefix>duties/<duty>/<lease>       the lock of a single-owner duty
//	                                    (HoldDuty, duty.go), such as an
//	                                    endpoint's mcp-mesh registration:
//	                                    as the sweep-leader lock
//	<prefix>limits/<limit id>/<owner-id>
//	                                    a replica that enforces a fleet-wide
//	                                    rate limit (JoinLimit, limits.go), on
//	                                    its owner lease; every replica
//	                                    watches limits/ once to compute its
//	                                    share (WatchLimitMembers)
//	<prefix>ping                        never written; read by Ping
//	<prefix>streams/<session>/<stream>  an MCP response stream's (SSE) log
//	                                    position: first retained and next
//	                                    event index, retained bytes; on a
//	                                    TTL-bucket lease of the log TTL from
//	                                    its last append. <session> is the
//	                                    path-escaped MCP session ID,
//	                                    <stream> the path-escaped stream ID
//	                                    ("%" for the standalone GET stream)
//	<prefix>streams/<session>/<stream>/ev/<seq>
//	                                    one SSE event's data, <seq> its
//	                                    20-digit zero-padded index; on a
//	                                    TTL-bucket lease of the log TTL
//
//	<prefix>mcp-session-index/<ws>/<digest>
//	                                    one key per recorded MCP session,
//	                                    named by MCPSessionDigest of its
//	                                    ID, the ID its value, on the
//	                                    record's lease (workspace
//	                                    path-escaped): the live-state
//	                                    listing's index; releases before
//	                                    it wrote mcp-session-list/<ws>/<id>
//	                                    (unread now, expiring)
//	<prefix>keys/<name>                 a secret key every replica shares
//	                                    (SharedKey: 32 random bytes, created
//	                                    once with a compare-and-swap on its
//	                                    absence, no lease, never replaced)
//	<prefix>catalogs/<name>             an operations catalog's head: its
//	                                    current version, when and by whom
//	                                    it was written, how many
//	                                    operations, the oldest version
//	                                    kept (no lease)
//	<prefix>catalog-versions/<name>/<v> one version's metadata: who,
//	                                    when, message, action, the
//	                                    operations it added, changed or
//	                                    removed; <v> 20 zero-padded digits
//	<prefix>catalog-documents/<name>/<v>
//	                                    that version's document: the
//	                                    operations as the operator wrote
//	                                    them, placeholders unexpanded
//
// # Operations catalogs
//
// A catalog is an operations file kept in etcd (catalog.go). Every change
// writes a new version — head, metadata and document in one
// compare-and-swap transaction on the head — and fails with a
// *CatalogConflictError (ErrConflict) when the writer's expected version
// is not the current one, so of two operators who read the same version
// only one writes the next. Versions are keys, not etcd revisions: etcd's
// compaction never loses one; a catalog keeps its last CatalogWrite.Keep
// versions (DefaultCatalogHistory), the write that passes the bound
// deleting the oldest. A deletion is a version too (history kept, a
// rollback restores it); PurgeCatalog removes everything. WatchCatalog
// follows a head across replicas, through purges and re-creations.
//
// # Live state
//
// CountLive counts a workspace's MCP sessions, open stream sessions and
// open jobs with count-only reads; ListMCPSessions, ListOpenStreamSessions
// and ListOpenJobs page through them from key indexes (keys first, then
// only the page's records); ReplicaNames names the replicas that own
// running entities; OperatorStreamSession and OperatorJob read an entity
// of a workspace whatever its agent, for an operator's stop or cancel, and
// OperatorMCPSession an MCP session by its digest (MCPSessionDigest): an
// MCP session ID is its client's credential, so no list names one.
//
// # IDs and visibility
//
// Stream session and job IDs are "ss_" / "job_" followed by
// crypto/rand.Text (at least 128 random bits, base32). An entity belongs to
// a workspace, and — when agent-scoped — to one agent of it; every read or
// client operation takes the caller's Scope, and an entity outside it is
// reported exactly like a missing one (ErrNotFound). Runner operations
// (append, finish, update) are checked against the owner instead.
//
// # Status machines and optimistic concurrency
//
// StreamSessionStatus and JobStatus document the allowed transitions;
// anything else fails with a *TransitionError (ErrIllegalTransition) naming
// both ends. Every change is a compare-and-swap: read the record, apply the
// transition to what was read, and commit in one etcd transaction only if
// the record's mod revision is unchanged (together with its items and index
// entry). A lost race re-applies to the value the transaction read back:
// 16 attempts at once, then with a jittered backoff until the operation
// timeout, then ErrConflict; so no update is ever lost. Where the
// caller's expectation itself is stale — an AdvanceStreamSession from a
// cursor another poll already moved, a poll from a cursor behind the
// acknowledged one — the store reports ErrConflict instead of applying it.
// Stop and cancel are idempotent; a cancel racing a finish either lands
// first (and is recorded) or is refused because the job already finished.
//
// # Item buffer
//
// A runner appends items (AppendStreamSessionItems) to a session's buffer
// of at most max_items items and max_bytes bytes; when it is full the store
// takes what fits and returns a *BufferFullError (ErrBufferFull). A poll
// acknowledges (deletes) the items up to the cursor it passes and returns
// the next ones; repeating a poll with the same cursor returns the same
// items. One item must fit in one etcd request (EtcdConfig.MaxRequestBytes,
// etcd's --max-request-bytes, default 1.5 MiB, minus 20 KiB); appends are
// split into transactions of at most 100 items and one request's bytes.
//
// # Listing jobs
//
// ListJobs pages through the jobs a caller sees, newest first, after an
// opaque position (the creation time and ID of the previous page's last
// job): it merges two ranges of the job-list index — the workspace's shared
// jobs and the caller's agent-scoped ones — reading only as many keys as the
// page needs, then the records they name, skipping entries whose job is
// gone or expired. A position stays valid when its job is gone. Jobs written
// only by replicas of a version without the index (created before an
// upgrade, or by a replica not yet upgraded) are not listed until an
// upgraded replica rewrites them (when it finishes them, for example); they
// are still served by ID.
//
// # SSE event logs
//
// AppendEvents and EventsAfter back MCP stream resumption (Last-Event-ID).
// Each append (a batch of up to 100 events) is one compare-and-swap
// transaction on the stream record that puts the events, moves the record
// and deletes trimmed events together; the
// replica that last wrote a stream remembers the record's revision, so its
// next append needs no read. A stream keeps at most EventLimits.MaxEvents
// events and MaxBytes bytes (trimming drops the oldest tenth); every event
// expires its TTL after it was appended. A replay reads the record and the
// events in one transaction and fails with ErrEventsPurged unless every
// event after the client's index is still there. AppendStreams appends
// the events of many streams at once: streams that simply grow (new ones
// starting at 0, or continued by the replica that wrote them last, within
// their bounds) share one transaction with a compare per stream record;
// the others, and all of a transaction whose compare failed, are appended
// one by one. A stream opened with StreamEvents.Request records the
// JSON-RPC id of the call it answers (alone, when none of its events is
// stored), which EventStream returns for a replay that cannot be
// served; a replay from past the events stored fails with
// ErrStreamNotStored like one of a stream without record.
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
// Stream sessions and jobs carry their own ExpiresAt, and every read treats
// an entity as absent from that instant on, so expiry is exact for callers;
// the bucket lease deletes the key at most about 2W later, and
// CleanupExpired (run by the sweep leader) deletes it earlier. A session's
// ExpiresAt is its idle timeout after its last poll (or creation), capped by
// its max lifetime; polls re-put the record on the bucket lease for the
// remaining time. A closed session, or a finished job, is re-put on a lease
// of its retention. Writes that do not extend an entity's life (appends,
// progress, stop requests) keep its current lease.
//
// Items and index entries belong to a parent whose lease moves on every
// poll, so a lease is not a parent pointer: they take their own bucket
// lease, for the time left until the parent's hard deadline (the latest the
// parent can exist), and are deleted with the parent by finish, cleanup and
// acknowledgement; item sets and index entries left behind by a parent that
// expired on its lease are removed by CleanupExpired or expire by their
// deadline.
//
// Touching an MCP session re-puts it onto the current bucket lease with a
// compare-and-swap on its mod revision (so a concurrent delete is never
// undone); when it is already on the current bucket lease, a touch is a
// single read. Grants within a bucket are serialised, so a burst of puts
// grants one lease. When etcd reports a bucket lease as not found (revoked
// or expired behind our back), the manager grants a fresh one and retries
// the operation.
//
// # Owners and the sweeper
//
// A replica that runs sessions or jobs registers once as an owner: a key
// owners/<owner-id> on a lease of EtcdConfig.OwnerTTL (default 10s) that an
// etcd concurrency.Session keeps alive — one lease per replica, not per
// entity. Running entities name their owner and have a running/<kind>/<id>
// index entry. RunSweeper, run on every replica, watches owners/ and, when an
// owner key disappears (its process died and the lease expired, or it
// closed), marks that owner's running entities failed with error_json
// {"code":"owner_lost",…} (stopping sessions become stopped), or offers them
// to an Adopt hook that may resume them on this replica. A dead replica's
// entities are thus marked about OwnerTTL after its last keep-alive; a
// periodic sweep (Interval, default 10s) catches a missed watch event. A
// sweep reads the running index 256 entries at a time, each page together
// with the owner keys (keys only). Close
// revokes the owner lease, so orphans of a replica that shut down are swept
// at once. If a replica's own owner lease is lost (etcd unreachable for
// longer than OwnerTTL), its session ends, its entities are swept like a dead
// replica's and its runner operations fail with ErrNotOwner; the next
// operation that needs an owner registers a new one.
//
// Expiry cleanups (CleanupExpired) run on one replica at a time, the sweep
// leader: at every CleanupInterval each sweeper tries the sweep-leader lock
// (concurrency.Mutex.TryLock on the owner session), which the holder keeps
// and the others find taken (they remove their key at once). The lock's key
// lives on the holder's owner lease, so leadership passes on when that
// replica closes or dies. Versions before this one elected the leader with a
// single key, <prefix>sweep-leader, which the lock's keys do not see: in a
// fleet mid-upgrade an old and a new replica may both lead and clean up at
// once, which is safe — every cleanup delete is a compare-and-swap on the
// entity's mod revision — and the old key ends with its replica's lease.
//
// WatchSignals — one watch per replica — carries stop and cancel requests
// from any replica to the runners; WatchStreamSession and WatchJob follow
// one entity (e.g. a client waiting for a job to finish). Watches resume
// after compaction, lost leaders and etcd restarts.
//
// # etcd unavailable
//
// Every operation runs under EtcdConfig.OpTimeout (default 5s) and fails
// with an *UnavailableError (ErrUnavailable, Retryable) when etcd does not
// answer in time — at once while the client's connection is known to be
// down. The client reconnects by itself (backoff capped at 1s, keep-alive
// pings every 5s), so the store recovers without intervention. Callers that
// need no state never touch the store and keep working.
//
// # etcd out of space
//
// A write that etcd refuses because its database reached its space quota
// (the NOSPACE alarm; from then on etcd refuses every write and lease grant
// until the alarm is disarmed) fails with a *NoSpaceError (ErrNoSpace, not
// Retryable). SpaceStatus tells whether writes are refused now, since when,
// and counts the refusals; the first refusal of an episode is logged at
// error level. RecoverSpace compacts, defragments and disarms; RunSweeper
// with SweeperConfig.RecoverSpace does so by itself while writes are
// refused (for an etcd this process alone uses, such as the embedded one).
// EmbeddedConfig.QuotaBytes and CompactionRetention size the embedded
// etcd's quota and history.
//
// Close does not revoke bucket leases: entries outlive the process and stay
// visible to other replicas until they expire.
package store
