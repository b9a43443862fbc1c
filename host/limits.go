package host

import (
	"fmt"
	"sync"

	"github.com/crankmcp/crank/internal/telemetry"
)

// Default quotas: what the crank handler applies where its config sets
// none (0 there means no limit). A start over a quota is an isError result
// naming it.
const (
	DefaultStreamSessionsPerWorkspace = 100
	DefaultStreamSessionsPerAgent     = 10
	DefaultJobsPerWorkspace           = 100
	DefaultJobsPerAgent               = 10
	DefaultStreamSessionsPerReplica   = 1000
	DefaultJobsPerReplica             = 1000
	// What finished jobs keep (Quotas' Retained fields): one agent's
	// results stay far below the embedded etcd's 2 GiB, a workspace's
	// below half of it.
	DefaultRetainedJobsPerAgent         = 100
	DefaultRetainedJobsPerWorkspace     = 10_000
	DefaultRetainedJobBytesPerAgent     = 64 << 20
	DefaultRetainedJobBytesPerWorkspace = 1 << 30
	// Per client (its user, else its agent header, else its address): half
	// of the workspace's open sessions and jobs (an agent host behind one
	// address runs many agents at once), a tenth of what its finished jobs
	// keep, so that one client fills its own budget and never the
	// workspace's.
	DefaultStreamSessionsPerClient   = 50
	DefaultJobsPerClient             = 50
	DefaultRetainedJobsPerClient     = 1000
	DefaultRetainedJobBytesPerClient = 128 << 20
)

// ReplicaLimits caps how many stream sessions and jobs run at once on
// this replica (process), over every host that shares it: each holds an
// adapter stream or call and an upstream connection for as long as it
// runs. A start beyond a cap is refused (an isError result naming it);
// the slot is taken before the session or job is created and given back
// when its runner ends. Zero means no cap; a nil *ReplicaLimits caps
// nothing. Safe for concurrent use.
type ReplicaLimits struct {
	mu                   sync.Mutex
	maxSessions, maxJobs int
	sessions, jobs       int
}

// NewReplicaLimits returns limits of sessions and jobs (0: no cap).
func NewReplicaLimits(sessions, jobs int) *ReplicaLimits {
	return &ReplicaLimits{maxSessions: sessions, maxJobs: jobs}
}

// Set changes the caps; what runs beyond a lowered cap runs on, and new
// starts wait for room.
func (l *ReplicaLimits) Set(sessions, jobs int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.maxSessions, l.maxJobs = sessions, jobs
}

// Running returns how many sessions and jobs run now, for metrics.
func (l *ReplicaLimits) Running() (sessions, jobs int) {
	if l == nil {
		return 0, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sessions, l.jobs
}

// take reserves a slot for a session (job false) or a job. It returns the
// function that gives the slot back (call it once), or a refusal naming
// the cap.
func (l *ReplicaLimits) take(job bool) (release func(), refusal string) {
	if l == nil {
		return func() {}, ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	n, limit, name, kind := &l.sessions, l.maxSessions, "max_sessions_per_replica", "sessions"
	if job {
		n, limit, name, kind = &l.jobs, l.maxJobs, "max_jobs_per_replica", "jobs"
	}
	if limit > 0 && *n >= limit {
		telemetry.QuotaRefusal(name)
		return nil, fmt.Sprintf("quota %s exceeded: this gateway replica already runs %d %s (limit %d); stop or finish one first, or try again later",
			name, *n, kind, limit)
	}
	*n++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			*n--
			l.mu.Unlock()
		})
	}, ""
}

// replicaQuotaError is a job start refused by ReplicaLimits; its text
// names the cap.
type replicaQuotaError string

func (e replicaQuotaError) Error() string { return string(e) }
