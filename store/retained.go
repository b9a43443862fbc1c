package store

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// What finished jobs keep. The open-entity quotas (Quota) bound what runs;
// RetainedQuota bounds what stays once it has finished: a finished job and
// its result are kept for the job's retention (an hour by default), and
// without a bound one agent could fill etcd with results no one reads.
//
// Two kinds of bound, because they cost etcd differently:
//
//   - Bytes are a write budget: the bytes of results (and error and record)
//     the finished jobs of an agent, or of a workspace, wrote and that are
//     still within their retention — evicted ones included. Past it a
//     start is refused (a *QuotaError); nothing is evicted, so an agent
//     cannot churn results through etcd (a deleted value stays in etcd's
//     history until compaction: evicting to make room would let one agent
//     write without bound).
//   - Counts bound records: past an agent's count its oldest finished jobs
//     are evicted — deleted, leaving a marker that tells the agent so when
//     it asks (*EvictedError) — and only that agent's, never another's. A
//     workspace's count refuses starts instead, since making room there
//     would evict other agents' jobs.
//
// Everything is counted from keys kept with the records, on their leases,
// with count-only range reads: no scan per call.
//
//	retained/jobs/<ws>/<agent>/<t>/<id>           one key per finished job kept
//	                                              (<t>: its finish time, 19-digit Unix
//	                                              nanoseconds, so the oldest sorts first)
//	retained-bytes/64k/<ws>/<agent>/<id>/<k>      one key per whole 64 KiB of the job's
//	retained-bytes/4k/<ws>/<agent>/<id>/<k>       bytes, then one per 4 KiB (rounded up)
//	                                              of the rest
//	evicted/jobs/<id>                             an evicted job's marker
//
// A job that names its client (NewJob.ClientID) is counted for its client
// too, in indexes of their own, so that one client fills its own budget
// and not its workspace's (the client: its user, else its agent header,
// else its address):
//
//	retained-client/jobs/<ws>/<client>/<t>/<id>
//	retained-client-bytes/64k/<ws>/<client>/<id>/<k>
//	retained-client-bytes/4k/<ws>/<client>/<id>/<k>
//
// The value of a job's retained index entries is its expiry (Unix
// nanoseconds): a refusal says when room frees from the oldest.
//
// The byte keys of an evicted job stay on their lease until the job would
// have expired, which is what makes the budget a budget.
const (
	retainedDir            = "retained/"
	retainedJobsDir        = retainedDir + "jobs/"
	retainedBytesDir       = "retained-bytes/"
	retainedClientDir      = "retained-client/"
	retainedClientJobsDir  = retainedClientDir + "jobs/"
	retainedClientBytesDir = "retained-client-bytes/"
	evictedJobsDir         = "evicted/jobs/"

	// RetainedBigUnit and RetainedSmallUnit are the byte units a job's
	// retained bytes are counted in: whole big units, then small units
	// rounded up, so a job costs at least RetainedSmallUnit.
	RetainedBigUnit   = 64 << 10
	RetainedSmallUnit = 4 << 10
)

// RetainedQuota bounds what finished jobs keep (see above); zero fields
// mean no bound. The per-agent bounds do not apply to jobs of no agent
// (sessionless callers that name none share the workspace's bounds).
type RetainedQuota struct {
	// JobsPerAgent: finished jobs one agent keeps; past it its oldest are
	// evicted.
	JobsPerAgent int
	// JobsPerClient and BytesPerClient: finished jobs one client keeps,
	// and the bytes they wrote within their retention, within its
	// workspace's; a start past either is refused. They count only jobs
	// that name their client (NewJob.ClientID).
	JobsPerClient  int
	BytesPerClient int64
	// BytesPerAgent and BytesPerWorkspace: bytes the finished jobs of an
	// agent (of a workspace) wrote within their retention; a start past
	// either is refused.
	BytesPerAgent, BytesPerWorkspace int64
	// JobsPerWorkspace: finished jobs a workspace keeps; a start past it
	// is refused.
	JobsPerWorkspace int
}

// Eviction reasons (EvictedError.Reason).
const (
	// EvictedAgentQuota: the agent kept more finished jobs than
	// RetainedQuota.JobsPerAgent; its oldest went first.
	EvictedAgentQuota = "agent_quota"
	// EvictedSpaceRecovery: etcd ran out of space and the space recovery
	// (SweeperConfig.RecoverSpace) dropped the oldest finished jobs.
	EvictedSpaceRecovery = "space_recovery"
)

// EvictedError reports a job that was evicted before its retention ended.
// It matches ErrNotFound with errors.Is: the job is gone.
type EvictedError struct {
	ID     string
	Reason string // EvictedAgentQuota or EvictedSpaceRecovery
	// Limit is the agent's quota of finished jobs (EvictedAgentQuota).
	Limit int
	At    time.Time
}

func (e *EvictedError) Error() string {
	if e.Reason == EvictedSpaceRecovery {
		return fmt.Sprintf("store: job %s was evicted at %s: etcd ran out of space and its oldest finished jobs were dropped",
			e.ID, e.At.Format(time.RFC3339))
	}
	return fmt.Sprintf("store: job %s was evicted at %s: its agent kept more than %d finished jobs, and the oldest go first",
		e.ID, e.At.Format(time.RFC3339), e.Limit)
}

// Is makes errors.Is(err, ErrNotFound) true.
func (e *EvictedError) Is(target error) bool { return target == ErrNotFound }

type evictedRecord struct {
	ID          string    `json:"id"`
	WorkspaceID string    `json:"workspace_id"`
	AgentID     string    `json:"agent_id,omitempty"`
	AgentScoped bool      `json:"agent_scoped,omitempty"`
	ClientID    string    `json:"client_id,omitempty"`
	Reason      string    `json:"reason"`
	Limit       int       `json:"limit,omitempty"`
	EvictedAt   time.Time `json:"evicted_at"`
	ExpiresAt   time.Time `json:"expires_at"`
}

func evictedKey(id string) string { return evictedJobsDir + id }

func retainedScopePrefix(workspace string) string {
	return retainedJobsDir + url.PathEscape(workspace) + "/"
}

func retainedAgentPrefix(workspace, agent string) string {
	return retainedScopePrefix(workspace) + url.PathEscape(agent) + "/"
}

func retainedKey(r *jobRecord) string {
	return retainedAgentPrefix(r.WorkspaceID, r.AgentID) + fmt.Sprintf("%019d/%s", r.FinishedAt.UnixNano(), r.ID)
}

// retainedClientPrefix is the retained index of a client of a workspace.
func retainedClientPrefix(workspace, client string) string {
	return retainedClientJobsDir + url.PathEscape(workspace) + "/" + url.PathEscape(client) + "/"
}

// retainedKeys are a finished job's retained index entries: its agent's
// and, when it names its client, its client's.
func retainedKeys(r *jobRecord) []string {
	keys := []string{retainedKey(r)}
	if r.ClientID != "" {
		keys = append(keys, retainedClientPrefix(r.WorkspaceID, r.ClientID)+fmt.Sprintf("%019d/%s", r.FinishedAt.UnixNano(), r.ID))
	}
	return keys
}

// retainedBytesUnits are the two unit directories (under a byte budget's
// directory), big first.
var retainedBytesUnits = [2]struct {
	dir  string
	size int64
}{{"64k/", RetainedBigUnit}, {"4k/", RetainedSmallUnit}}

// retainedBytesPrefix is the range of one unit's keys under dir (of the
// agents' budgets, or the clients') of a workspace, of an agent or client
// of it (owner set) or of one job of that one (id set too).
func retainedBytesPrefix(dir string, unit int, workspace string, owner *string, id string) string {
	p := dir + retainedBytesUnits[unit].dir + url.PathEscape(workspace) + "/"
	if owner != nil {
		p += url.PathEscape(*owner) + "/"
		if id != "" {
			p += id + "/"
		}
	}
	return p
}

// bytesOwners are the byte budgets a job counts against: its agent's and,
// when it names its client, its client's (directory and owner).
func bytesOwners(r *jobRecord) [][2]string {
	out := [][2]string{{retainedBytesDir, r.AgentID}}
	if r.ClientID != "" {
		out = append(out, [2]string{retainedClientBytesDir, r.ClientID})
	}
	return out
}

// retainedUnits splits n bytes into whole big units and small units
// rounded up (at least one small unit).
func retainedUnits(n int64) (big, small int64) {
	big = n / RetainedBigUnit
	small = max(1, (n%RetainedBigUnit+RetainedSmallUnit-1)/RetainedSmallUnit)
	return big, small
}

// retainedBytes is what a finished job counts against the byte budgets:
// its result, its record (error_json included) and a little for its keys.
func retainedBytes(resultBytes, recordBytes int) int64 {
	return int64(resultBytes) + int64(recordBytes) + 256
}

// putRetained adds the keys that count a finished job (its retained index
// entry and its byte units) to p, on a lease until the job's expiry.
func (p *plan) putRetained(r *jobRecord, recordBytes int, now time.Time) error {
	ttl := r.ExpiresAt.Sub(now)
	if ttl <= 0 {
		return nil
	}
	expiry := []byte(strconv.FormatInt(r.ExpiresAt.UnixNano(), 10))
	for _, k := range retainedKeys(r) {
		if err := p.put(k, expiry, ttl); err != nil {
			return err
		}
	}
	big, small := retainedUnits(retainedBytes(r.ResultBytes, recordBytes))
	for _, o := range bytesOwners(r) {
		for u, n := range [2]int64{big, small} {
			prefix := retainedBytesPrefix(o[0], u, r.WorkspaceID, &o[1], r.ID)
			for k := range n {
				if err := p.put(fmt.Sprintf("%s%04d", prefix, k), nil, ttl); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// delRetained adds the deletion of a job's retained keys to p: its index
// entries and, with bytes, its byte units.
func (p *plan) delRetained(r *jobRecord, bytes bool) {
	if !r.FinishedAt.IsZero() {
		for _, k := range retainedKeys(r) {
			p.del(k)
		}
	}
	if bytes {
		for _, o := range bytesOwners(r) {
			for u := range retainedBytesUnits {
				p.del(retainedBytesPrefix(o[0], u, r.WorkspaceID, &o[1], r.ID), clientv3.WithPrefix())
			}
		}
	}
}

// retainedChecks are the retained-job bounds a new job of scope and
// client ("" for none) must fit in: the count of the workspace, the bytes
// of the workspace and of the agent, and the count and bytes of the
// client.
func retainedChecks(scope Scope, client string, q RetainedQuota) []countCheck {
	ws := fmt.Sprintf("workspace %q", scope.WorkspaceID)
	agent := fmt.Sprintf("agent %q of workspace %q", scope.AgentID, scope.WorkspaceID)
	checks := []countCheck{
		{quota: "per_workspace", retained: RetainedJobs, scope: ws, limit: int64(q.JobsPerWorkspace),
			prefixes: []string{retainedScopePrefix(scope.WorkspaceID)}, units: []int64{1}, jobs: retainedScopePrefix(scope.WorkspaceID)},
		bytesCheck("per_workspace", ws, q.BytesPerWorkspace, retainedBytesDir, scope.WorkspaceID, nil, retainedScopePrefix(scope.WorkspaceID)),
	}
	if scope.AgentID != "" {
		checks = append(checks, bytesCheck("per_agent", agent, q.BytesPerAgent, retainedBytesDir, scope.WorkspaceID, &scope.AgentID,
			retainedAgentPrefix(scope.WorkspaceID, scope.AgentID)))
	}
	if client != "" {
		cs, jobs := clientScope(scope.WorkspaceID, client), retainedClientPrefix(scope.WorkspaceID, client)
		checks = append(checks,
			countCheck{quota: "per_client", retained: RetainedJobs, scope: cs, limit: int64(q.JobsPerClient),
				prefixes: []string{jobs}, units: []int64{1}, jobs: jobs},
			bytesCheck("per_client", cs, q.BytesPerClient, retainedClientBytesDir, scope.WorkspaceID, &client, jobs))
	}
	return checks
}

// bytesCheck is the byte budget of a workspace, or of an agent or client
// of it (owner), under dir; jobs is the retained index of its jobs.
func bytesCheck(quota, scope string, limit int64, dir, workspace string, owner *string, jobs string) countCheck {
	c := countCheck{quota: quota, retained: RetainedBytes, scope: scope, limit: limit, jobs: jobs}
	for u, unit := range retainedBytesUnits {
		c.prefixes = append(c.prefixes, retainedBytesPrefix(dir, u, workspace, owner, ""))
		c.units = append(c.units, unit.size)
	}
	return c
}

// oldestRetainedExpiry is when the oldest finished job in the retained
// index prefix expires (the first entry written there; zero when none or
// not known): room frees for a retained-job quota then. One read, only on
// a refusal; a job finished before its entry held its expiry costs one
// more, of its record.
func (e *Etcd) oldestRetainedExpiry(ctx context.Context, prefix string) time.Time {
	var kv *mvccpb.KeyValue
	err := e.read(ctx, "read the oldest retained job", func(ctx context.Context, rd clientv3.KV) error {
		resp, err := rd.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithLimit(1),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
		if err == nil && len(resp.Kvs) > 0 {
			kv = resp.Kvs[0]
		}
		return err
	})
	if err != nil || kv == nil {
		return time.Time{}
	}
	if ns, err := strconv.ParseInt(string(kv.Value), 10, 64); err == nil {
		return time.Unix(0, ns).UTC()
	}
	key := string(kv.Key)
	id := key[strings.LastIndexByte(key, '/')+1:]
	if !wellFormedID(id, JobIDPrefix) {
		return time.Time{}
	}
	rec, err := e.get(ctx, "get job "+id, jobKind.key(id))
	if err != nil || rec == nil {
		return time.Time{}
	}
	r, err := jobKind.decode(rec)
	if err != nil {
		return time.Time{}
	}
	return r.ExpiresAt
}

// trimRetained evicts the oldest finished jobs of r's agent past its
// quota of finished jobs (r.RetainLimit), after r finished. It is best
// effort: a failure is logged, and the next finish trims again.
func (e *Etcd) trimRetained(ctx context.Context, r *jobRecord) {
	limit := r.RetainLimit
	if limit <= 0 || r.AgentID == "" {
		return
	}
	prefix := retainedAgentPrefix(r.WorkspaceID, r.AgentID)
	n, err := e.countPrefix(ctx, "count retained jobs", prefix)
	if err != nil || n <= int64(limit) {
		e.logTrim(err)
		return
	}
	var keys []string
	err = e.do(ctx, "list the oldest retained jobs", func(ctx context.Context) error {
		resp, err := e.kv.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(n-int64(limit)))
		if err != nil {
			return err
		}
		for _, kv := range resp.Kvs {
			keys = append(keys, string(kv.Key))
		}
		return nil
	})
	for _, k := range keys {
		if err == nil {
			_, err = e.evictJob(ctx, k, EvictedAgentQuota, limit, true)
		}
	}
	e.logTrim(err)
}

func (e *Etcd) logTrim(err error) {
	if err != nil {
		e.log.Debug("oldest finished jobs not evicted; the next finish tries again", zap.Error(err))
	}
}

// evictJob evicts the finished job that the retained index entry key
// names: its record, result, list and index entries go; with mark, a
// marker saying why stays until the job would have expired. A write
// refused for lack of space is why the space recovery evicts without a
// marker (it writes the markers once writes work again). It returns the
// job evicted (nil when the entry was stale: the entry is deleted then).
func (e *Etcd) evictJob(ctx context.Context, key, reason string, limit int, mark bool) (*jobRecord, error) {
	id := key[strings.LastIndexByte(key, '/')+1:]
	if !wellFormedID(id, JobIDPrefix) {
		return nil, nil
	}
	var out *jobRecord
	_, err := e.cas(ctx, "evict job "+id, jobKind.key(id), func(kv *mvccpb.KeyValue, p *plan) error {
		out = nil
		if kv == nil {
			p.del(key) // the job is gone: only its entry is left
			return nil
		}
		r, err := jobKind.decode(kv)
		if err != nil || !r.Status.Terminal() {
			return nil // not a finished job: leave it to the cleanup
		}
		now := e.now().UTC()
		out = r
		p.del(jobKind.key(id))
		p.del(jobResultKey(id))
		p.del(jobListKey(r))
		p.delRetained(r, false) // its bytes stay counted until it would have expired
		if !slices.Contains(retainedKeys(r), key) {
			p.del(key)
		}
		if !mark {
			return nil
		}
		return p.putEvicted(r, reason, limit, now)
	})
	return out, err
}

// putEvicted adds the marker of an evicted job to p.
func (p *plan) putEvicted(r *jobRecord, reason string, limit int, now time.Time) error {
	ttl := r.ExpiresAt.Sub(now)
	if ttl <= 0 {
		return nil
	}
	val, _ := p.e.encodeRecord(evictedRecord{ID: r.ID, WorkspaceID: r.WorkspaceID, AgentID: r.AgentID, AgentScoped: r.AgentScoped,
		ClientID: r.ClientID, Reason: reason, Limit: limit, EvictedAt: now, ExpiresAt: r.ExpiresAt})
	return p.put(evictedKey(r.ID), val, ttl)
}

// goneJob explains a job that a read did not find: an *EvictedError when
// marker (the evicted marker read with it, nil for none) says it was
// evicted and scope may see it, ErrNotFound otherwise.
func (e *Etcd) goneJob(marker *mvccpb.KeyValue, scope *Scope) error {
	if marker == nil {
		return ErrNotFound
	}
	var m evictedRecord
	if err := decodeRecord("eviction marker", marker.Value, &m); err != nil || string(marker.Key) != evictedKey(m.ID) ||
		!e.now().Before(m.ExpiresAt) {
		return ErrNotFound
	}
	if scope != nil && (m.WorkspaceID != scope.WorkspaceID || m.AgentScoped && m.AgentID != scope.AgentID) {
		return ErrNotFound
	}
	return &EvictedError{ID: m.ID, Reason: m.Reason, Limit: m.Limit, At: m.EvictedAt}
}

// explainMissing turns the ErrNotFound of a job read into the job's
// *EvictedError when it was evicted (one more read, on that path only;
// none for an ID that cannot exist).
func (e *Etcd) explainMissing(ctx context.Context, scope *Scope, id string, err error) error {
	if err != ErrNotFound || !wellFormedID(id, JobIDPrefix) {
		return err
	}
	kv, gerr := e.get(ctx, "get evicted job "+id, evictedKey(id))
	if gerr != nil {
		return err
	}
	return e.goneJob(kv, scope)
}

// cleanupEvicted deletes expired eviction markers and the byte units
// their jobs left (their leases delete both anyway, a little later).
func (e *Etcd) cleanupEvicted(ctx context.Context, now time.Time, rep *CleanupReport) error {
	return e.scan(ctx, evictedJobsDir, false, func(kv *mvccpb.KeyValue) error {
		var m evictedRecord
		err := decodeRecord("eviction marker", kv.Value, &m)
		if err == nil && now.Before(m.ExpiresAt) {
			return nil
		}
		p := e.newPlan(ctx)
		if err == nil && wellFormedID(m.ID, JobIDPrefix) && string(kv.Key) == evictedKey(m.ID) {
			p.delRetained(&jobRecord{owned: owned[JobStatus]{ID: m.ID, WorkspaceID: m.WorkspaceID, AgentID: m.AgentID, ClientID: m.ClientID}}, true)
		}
		p.del(string(kv.Key))
		deleted, err := e.deleteAt(ctx, "delete eviction marker", string(kv.Key), kv.ModRevision, p.ops...)
		if deleted {
			rep.StaleIndex++
		}
		return err
	})
}
