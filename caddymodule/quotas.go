package caddymodule

import (
	"fmt"
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/crankmcp/crank/host"
)

// Quotas bound the sessions and jobs open at once per workspace and per
// agent. A quota left out takes its default (host.DefaultStreamSessionsPerWorkspace
// and its siblings: 100 sessions and 100 jobs per workspace, 10 of each
// per agent); 0 means no limit. The agent is the caller's identity:
// Caddy's authenticated user, else the agent_header, else the MCP
// session.
type Quotas struct {
	MaxSessionsPerWorkspace *int `json:"max_sessions_per_workspace,omitempty"`
	MaxSessionsPerAgent     *int `json:"max_sessions_per_agent,omitempty"`
	MaxJobsPerWorkspace     *int `json:"max_jobs_per_workspace,omitempty"`
	MaxJobsPerAgent         *int `json:"max_jobs_per_agent,omitempty"`
}

// ReplicaQuotas cap the sessions and jobs running at once in this Caddy
// process, over all its crank handlers (the crank app's quotas). A cap
// left out takes its default (host.DefaultStreamSessionsPerReplica,
// host.DefaultJobsPerReplica: 1000 each); 0 means no cap.
type ReplicaQuotas struct {
	MaxSessionsPerReplica *int `json:"max_sessions_per_replica,omitempty"`
	MaxJobsPerReplica     *int `json:"max_jobs_per_replica,omitempty"`
}

// replicaLimits are the process's caps, shared by every handler (and by
// the configs a reload overlaps); the crank app sets them when it starts.
var replicaLimits = host.NewReplicaLimits(host.DefaultStreamSessionsPerReplica, host.DefaultJobsPerReplica)

// orDefault is *v, or def when v is nil.
func orDefault(v *int, def int) int {
	if v == nil {
		return def
	}
	return *v
}

func (q *Quotas) host() host.Quotas {
	if q == nil {
		q = &Quotas{}
	}
	return host.Quotas{
		StreamSessionsPerWorkspace: orDefault(q.MaxSessionsPerWorkspace, host.DefaultStreamSessionsPerWorkspace),
		StreamSessionsPerAgent:     orDefault(q.MaxSessionsPerAgent, host.DefaultStreamSessionsPerAgent),
		JobsPerWorkspace:           orDefault(q.MaxJobsPerWorkspace, host.DefaultJobsPerWorkspace),
		JobsPerAgent:               orDefault(q.MaxJobsPerAgent, host.DefaultJobsPerAgent),
		Replica:                    replicaLimits,
	}
}

// limits returns the replica caps of q (defaults where unset).
func (q *ReplicaQuotas) limits() (sessions, jobs int) {
	if q == nil {
		q = &ReplicaQuotas{}
	}
	return orDefault(q.MaxSessionsPerReplica, host.DefaultStreamSessionsPerReplica), orDefault(q.MaxJobsPerReplica, host.DefaultJobsPerReplica)
}

type quotaField struct {
	name string
	v    **int
}

func (q *Quotas) fields() []quotaField {
	return []quotaField{{"max_sessions_per_workspace", &q.MaxSessionsPerWorkspace}, {"max_sessions_per_agent", &q.MaxSessionsPerAgent},
		{"max_jobs_per_workspace", &q.MaxJobsPerWorkspace}, {"max_jobs_per_agent", &q.MaxJobsPerAgent}}
}

func (q *ReplicaQuotas) fields() []quotaField {
	return []quotaField{{"max_sessions_per_replica", &q.MaxSessionsPerReplica}, {"max_jobs_per_replica", &q.MaxJobsPerReplica}}
}

func validateQuotas(fields []quotaField) error {
	for _, f := range fields {
		if *f.v != nil && **f.v < 0 {
			return fmt.Errorf("crank: quotas.%s: must not be negative (got %d)", f.name, **f.v)
		}
	}
	return nil
}

func (q *Quotas) validate() error {
	if q == nil {
		return nil
	}
	return validateQuotas(q.fields())
}

func (q *ReplicaQuotas) validate() error {
	if q == nil {
		return nil
	}
	return validateQuotas(q.fields())
}

// unmarshalQuotas reads a handler's quotas block:
//
//	quotas {
//	    max_sessions_per_workspace <n>
//	    max_sessions_per_agent     <n>
//	    max_jobs_per_workspace     <n>
//	    max_jobs_per_agent         <n>
//	}
func unmarshalQuotas(d *caddyfile.Dispenser) (*Quotas, error) {
	q := &Quotas{}
	return q, unmarshalQuotaBlock(d, q.fields())
}

// unmarshalReplicaQuotas reads the crank app's quotas block:
//
//	quotas {
//	    max_sessions_per_replica <n>
//	    max_jobs_per_replica     <n>
//	}
func unmarshalReplicaQuotas(d *caddyfile.Dispenser) (*ReplicaQuotas, error) {
	q := &ReplicaQuotas{}
	return q, unmarshalQuotaBlock(d, q.fields())
}

func unmarshalQuotaBlock(d *caddyfile.Dispenser, fields []quotaField) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		name := d.Val()
		var dst **int
		for _, f := range fields {
			if f.name == name {
				dst = f.v
			}
		}
		if dst == nil {
			return d.Errf("unrecognized quotas option %q", name)
		}
		var s string
		if !d.AllArgs(&s) {
			return d.ArgErr()
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return d.Errf("quotas %s: must be a whole number, 0 for unlimited (got %q)", name, s)
		}
		*dst = &n
	}
	return nil
}
