package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrQuota: creating the session or job would exceed a concurrency quota.
// See QuotaError.
var ErrQuota = errors.New("store: quota exceeded")

// Quota bounds how many sessions (or jobs) may be open at once — active or
// stopping sessions, queued, running or canceling jobs — per workspace and
// per agent of a workspace. Zero means unlimited.
//
// Open entities are counted from an index the store keeps with every
// record (active/<kind>/<workspace>/<agent>/<id>, on the record's own
// lease, removed when it finishes), so a check is one count-only range
// read. The count and the create are two requests: starts racing on
// several replicas can overshoot a quota by the number of racers.
type Quota struct {
	PerWorkspace int
	PerAgent     int
	// PerClient bounds the open entities of one client within the
	// workspace (NewJob.ClientID, NewStreamSession.ClientID), counted from
	// an index of their own (active-client/…), so that one client fills
	// its own budget, not its workspace's.
	PerClient int
}

// QuotaError names the quota a create would exceed.
type QuotaError struct {
	Kind  string // "stream session" or "job"
	Quota string // "per_workspace" or "per_agent"
	// Retained is "" for a quota of open entities, RetainedJobs or
	// RetainedBytes for one of what finished jobs keep (RetainedQuota).
	Retained string
	Scope    string // the workspace (and agent) counted
	Limit    int64
	// Open is what was counted: open entities, finished jobs kept or
	// bytes they wrote.
	Open int64
	// FreesAt is when room frees for a quota of what finished jobs keep:
	// the expiry of the oldest finished job counted (zero when not known;
	// for a quota of open entities, room frees as one of them ends).
	FreesAt time.Time
}

// Retained quota kinds (QuotaError.Retained).
const (
	RetainedJobs  = "jobs"
	RetainedBytes = "bytes"
)

func (e *QuotaError) Error() string {
	switch e.Retained {
	case RetainedJobs:
		return fmt.Sprintf("store: retained %ss quota %s exceeded: %s keeps %d finished %ss (limit %d)",
			e.Kind, e.Quota, e.Scope, e.Open, e.Kind, e.Limit)
	case RetainedBytes:
		return fmt.Sprintf("store: retained %s bytes quota %s exceeded: the finished %ss of %s wrote %d bytes still kept (limit %d)",
			e.Kind, e.Quota, e.Kind, e.Scope, e.Open, e.Limit)
	}
	return fmt.Sprintf("store: quota %s exceeded: %s already has %d open %ss (limit %d)",
		e.Quota, e.Scope, e.Open, e.Kind, e.Limit)
}

// Is makes errors.Is(err, ErrQuota) true.
func (e *QuotaError) Is(target error) bool { return target == ErrQuota }

const (
	activeDir       = "active/"
	activeClientDir = "active-client/"
)

// activeClientPrefix is the open-entity index of one client.
func activeClientPrefix(kind, workspace, client string) string {
	return activeClientDir + kind + "/" + url.PathEscape(workspace) + "/" + url.PathEscape(client) + "/"
}

func activeScopePrefix(kind, workspace string) string {
	return activeDir + kind + "/" + url.PathEscape(workspace) + "/"
}

func activeAgentPrefix(kind, workspace, agent string) string {
	return activeScopePrefix(kind, workspace) + url.PathEscape(agent) + "/"
}

func activeKey(kind, workspace, agent, id string) string {
	return activeAgentPrefix(kind, workspace, agent) + id
}

// putEntity adds the put of a session or job record to p — on a bucket
// lease until expiresAt when refresh is set, otherwise on the lease it has
// — and keeps its open-entity index entries (activeKeys: the agent's, and
// the client's when it has one) in step: on the same lease while the
// entity is open, deleted once it is final.
func (p *plan) putEntity(key string, val []byte, expiresAt, now time.Time, refresh bool, activeKeys []string, open bool) error {
	ttl := leaseKeep
	if refresh {
		ttl = expiresAt.Sub(now)
		if ttl <= 0 {
			return ErrNotFound
		}
	}
	if err := p.put(key, val, ttl); err != nil {
		return err
	}
	for _, k := range activeKeys {
		if !open {
			p.del(k)
			continue
		}
		if err := p.put(k, nil, ttl); err != nil {
			return err
		}
	}
	return nil
}

// countCheck is one bound a create must fit in: the keys under prefixes,
// each counting units[i], must add up to less than limit (0: no limit).
type countCheck struct {
	quota, retained, scope string
	limit                  int64
	prefixes               []string
	units                  []int64
	// jobs, for a check of what finished jobs keep, is the retained index
	// of the scope's jobs: the oldest of them says when room frees.
	jobs string
}

// openChecks are the quotas of open entities a new one of scope and
// client ("" for none) must fit in.
func openChecks(kind string, scope Scope, client string, q Quota) []countCheck {
	checks := []countCheck{
		{quota: "per_workspace", scope: fmt.Sprintf("workspace %q", scope.WorkspaceID), limit: int64(q.PerWorkspace),
			prefixes: []string{activeScopePrefix(kind, scope.WorkspaceID)}, units: []int64{1}},
		{quota: "per_agent", scope: fmt.Sprintf("agent %q of workspace %q", scope.AgentID, scope.WorkspaceID), limit: int64(q.PerAgent),
			prefixes: []string{activeAgentPrefix(kind, scope.WorkspaceID, scope.AgentID)}, units: []int64{1}},
	}
	if client != "" {
		checks = append(checks, countCheck{quota: "per_client", scope: clientScope(scope.WorkspaceID, client), limit: int64(q.PerClient),
			prefixes: []string{activeClientPrefix(kind, scope.WorkspaceID, client)}, units: []int64{1}})
	}
	return checks
}

// clientScope names a client of a workspace in a quota's error.
func clientScope(workspace, client string) string {
	return fmt.Sprintf("client %q of workspace %q", client, workspace)
}

// checkQuota counts, with count-only range reads in one transaction, what
// each check bounds, and fails with a *QuotaError naming the first check
// that one more entity would exceed.
func (e *Etcd) checkQuota(ctx context.Context, label string, checks []countCheck) error {
	var ops []clientv3.Op
	var counted []countCheck
	for _, c := range checks {
		if c.limit < 0 {
			return fmt.Errorf("store: %w: quota must not be negative", ErrInvalid)
		}
		if c.limit == 0 {
			continue
		}
		counted = append(counted, c)
		for _, p := range c.prefixes {
			ops = append(ops, clientv3.OpGet(p, clientv3.WithPrefix(), clientv3.WithCountOnly()))
		}
	}
	if len(ops) == 0 {
		return nil
	}
	var resp *clientv3.TxnResponse
	err := e.read(ctx, "count "+label+"s for quotas", func(ctx context.Context, rd clientv3.KV) error {
		var err error
		resp, err = rd.Txn(ctx).Then(ops...).Commit()
		return err
	})
	if err != nil {
		return err
	}
	i := 0
	for _, c := range counted {
		var n int64
		for _, u := range c.units {
			n += resp.Responses[i].GetResponseRange().GetCount() * u
			i++
		}
		if n >= c.limit {
			qe := &QuotaError{Kind: label, Quota: c.quota, Retained: c.retained, Scope: c.scope, Limit: c.limit, Open: n}
			if c.jobs != "" {
				qe.FreesAt = e.oldestRetainedExpiry(ctx, c.jobs)
			}
			return qe
		}
	}
	return nil
}

// CountOpen returns how many sessions (jobs false) or jobs (jobs true) of
// the scope's workspace — and of its agent, when agent is set — are open.
func (e *Etcd) CountOpen(ctx context.Context, scope Scope, jobs, agent bool) (int, error) {
	kind := streamSessionKind.index
	if jobs {
		kind = jobKind.index
	}
	prefix := activeScopePrefix(kind, scope.WorkspaceID)
	if agent {
		prefix = activeAgentPrefix(kind, scope.WorkspaceID, scope.AgentID)
	}
	n, err := e.countPrefix(ctx, "count open "+kind, prefix)
	return int(n), err
}

// countPrefix counts the keys under prefix (a count-only range read).
func (e *Etcd) countPrefix(ctx context.Context, op, prefix string) (int64, error) {
	var n int64
	err := e.read(ctx, op, func(ctx context.Context, rd clientv3.KV) error {
		resp, err := rd.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return err
		}
		n = resp.Count
		return nil
	})
	return n, err
}
