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
}

// QuotaError names the quota a create would exceed.
type QuotaError struct {
	Kind  string // "stream session" or "job"
	Quota string // "per_workspace" or "per_agent"
	Scope string // the workspace (and agent) counted
	Limit int
	Open  int
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("store: quota %s exceeded: %s already has %d open %ss (limit %d)",
		e.Quota, e.Scope, e.Open, e.Kind, e.Limit)
}

// Is makes errors.Is(err, ErrQuota) true.
func (e *QuotaError) Is(target error) bool { return target == ErrQuota }

const (
	activeDir            = "active/"
	activeStreamSessions = "sessions"
	activeJobs           = "jobs"
)

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
// — and keeps its open-entity index entry (activeKey) in step: on the same
// lease while the entity is open, deleted once it is final.
func (p *plan) putEntity(key string, val []byte, expiresAt, now time.Time, refresh bool, activeKey string, open bool) error {
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
	if !open {
		p.del(activeKey)
		return nil
	}
	return p.put(activeKey, nil, ttl)
}

// checkQuota counts the open entities of scope and fails with a
// *QuotaError when one more would exceed q.
func (e *Etcd) checkQuota(ctx context.Context, kind, label string, scope Scope, q Quota) error {
	if q.PerWorkspace < 0 || q.PerAgent < 0 {
		return fmt.Errorf("store: %w: quota must not be negative", ErrInvalid)
	}
	check := []struct {
		name, prefix, scope string
		limit               int
	}{
		{"per_workspace", activeScopePrefix(kind, scope.WorkspaceID), fmt.Sprintf("workspace %q", scope.WorkspaceID), q.PerWorkspace},
		{"per_agent", activeAgentPrefix(kind, scope.WorkspaceID, scope.AgentID),
			fmt.Sprintf("agent %q of workspace %q", scope.AgentID, scope.WorkspaceID), q.PerAgent},
	}
	for _, c := range check {
		if c.limit == 0 {
			continue
		}
		n, err := e.countPrefix(ctx, "count open "+label+"s", c.prefix)
		if err != nil {
			return err
		}
		if n >= int64(c.limit) {
			return &QuotaError{Kind: label, Quota: c.name, Scope: c.scope, Limit: c.limit, Open: int(n)}
		}
	}
	return nil
}

// CountOpen returns how many sessions (jobs false) or jobs (jobs true) of
// the scope's workspace — and of its agent, when agent is set — are open.
func (e *Etcd) CountOpen(ctx context.Context, scope Scope, jobs, agent bool) (int, error) {
	kind := activeStreamSessions
	if jobs {
		kind = activeJobs
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
	err := e.do(ctx, op, func(ctx context.Context) error {
		resp, err := e.kv.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return err
		}
		n = resp.Count
		return nil
	})
	return n, err
}
