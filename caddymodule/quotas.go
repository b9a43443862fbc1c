package caddymodule

import (
	"fmt"
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/mcpserver"
	"github.com/crankmcp/crank/store"
)

// Quotas bound the sessions and jobs open at once per workspace, per
// agent and per client, and what finished jobs and SSE event logs keep. A quota left out
// takes its default (host.DefaultStreamSessionsPerWorkspace and its
// siblings: 100 sessions and 100 jobs per workspace, 10 of each per agent;
// host.DefaultRetainedJobsPerAgent and its siblings;
// mcpserver.DefaultEventBytesPerSession and PerClient); 0 means no limit.
// The agent is the caller's identity: Caddy's authenticated user, else the
// agent_header, else the MCP session.
type Quotas struct {
	MaxSessionsPerWorkspace *int `json:"max_sessions_per_workspace,omitempty"`
	MaxSessionsPerAgent     *int `json:"max_sessions_per_agent,omitempty"`
	MaxJobsPerWorkspace     *int `json:"max_jobs_per_workspace,omitempty"`
	MaxJobsPerAgent         *int `json:"max_jobs_per_agent,omitempty"`
	// MaxSessionsPerClient and MaxJobsPerClient bound them per client
	// (its user, else its agent header, else its address) within the
	// workspace's (defaults 50 each), so that one client — an anonymous
	// one, whose every MCP session is a new agent — fills its own budget.
	MaxSessionsPerClient *int `json:"max_sessions_per_client,omitempty"`
	MaxJobsPerClient     *int `json:"max_jobs_per_client,omitempty"`
	// MaxRetainedJobsPerClient and MaxRetainedJobBytesPerClient: finished
	// jobs a client keeps and the bytes they wrote within their retention
	// (defaults 1000 and 128 MiB); a start past either is refused.
	MaxRetainedJobsPerClient     *int   `json:"max_retained_jobs_per_client,omitempty"`
	MaxRetainedJobBytesPerClient *int64 `json:"max_retained_job_bytes_per_client,omitempty"`
	// MaxRetainedJobsPerAgent: finished jobs an agent keeps (default 100);
	// past it the agent's own oldest are evicted, and reading one says so.
	MaxRetainedJobsPerAgent *int `json:"max_retained_jobs_per_agent,omitempty"`
	// MaxRetainedJobsPerWorkspace: finished jobs a workspace keeps
	// (default 10000); a start past it is refused.
	MaxRetainedJobsPerWorkspace *int `json:"max_retained_jobs_per_workspace,omitempty"`
	// MaxRetainedJobBytesPerAgent and MaxRetainedJobBytesPerWorkspace:
	// bytes of results the finished jobs of an agent (a workspace) wrote
	// within their retention, evicted ones included (defaults 64 MiB and
	// 1 GiB); a start past either is refused.
	MaxRetainedJobBytesPerAgent     *int64 `json:"max_retained_job_bytes_per_agent,omitempty"`
	MaxRetainedJobBytesPerWorkspace *int64 `json:"max_retained_job_bytes_per_workspace,omitempty"`
	// MaxEventBytesPerSession and MaxEventBytesPerClient: bytes of SSE
	// event logs an MCP session and a client address keep on a replica
	// within the event TTL (defaults 8 MiB and 64 MiB, or event_max_bytes
	// when that is more; set, at least event_max_bytes); a stream past
	// either is not stored.
	MaxEventBytesPerSession *int64 `json:"max_event_bytes_per_session,omitempty"`
	MaxEventBytesPerClient  *int64 `json:"max_event_bytes_per_client,omitempty"`
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
func orDefault[T int | int64](v *T, def T) T {
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
		StreamSessionsPerWorkspace:   orDefault(q.MaxSessionsPerWorkspace, host.DefaultStreamSessionsPerWorkspace),
		StreamSessionsPerAgent:       orDefault(q.MaxSessionsPerAgent, host.DefaultStreamSessionsPerAgent),
		JobsPerWorkspace:             orDefault(q.MaxJobsPerWorkspace, host.DefaultJobsPerWorkspace),
		JobsPerAgent:                 orDefault(q.MaxJobsPerAgent, host.DefaultJobsPerAgent),
		RetainedJobsPerAgent:         orDefault(q.MaxRetainedJobsPerAgent, host.DefaultRetainedJobsPerAgent),
		RetainedJobsPerWorkspace:     orDefault(q.MaxRetainedJobsPerWorkspace, host.DefaultRetainedJobsPerWorkspace),
		RetainedJobBytesPerAgent:     orDefault(q.MaxRetainedJobBytesPerAgent, host.DefaultRetainedJobBytesPerAgent),
		RetainedJobBytesPerWorkspace: orDefault(q.MaxRetainedJobBytesPerWorkspace, host.DefaultRetainedJobBytesPerWorkspace),
		StreamSessionsPerClient:      orDefault(q.MaxSessionsPerClient, host.DefaultStreamSessionsPerClient),
		JobsPerClient:                orDefault(q.MaxJobsPerClient, host.DefaultJobsPerClient),
		RetainedJobsPerClient:        orDefault(q.MaxRetainedJobsPerClient, host.DefaultRetainedJobsPerClient),
		RetainedJobBytesPerClient:    orDefault(q.MaxRetainedJobBytesPerClient, host.DefaultRetainedJobBytesPerClient),
		Replica:                      replicaLimits,
	}
}

// events returns the event-log quotas of q: defaults where unset, raised
// to streamMax (event_max_bytes; 0: the store's default), what one stream
// keeps.
func (q *Quotas) events(streamMax int64) mcpserver.EventQuota {
	if q == nil {
		q = &Quotas{}
	}
	if streamMax == 0 {
		streamMax = store.DefaultEventMaxBytes
	}
	return mcpserver.EventQuota{
		PerSession: orDefault(q.MaxEventBytesPerSession, max(mcpserver.DefaultEventBytesPerSession, streamMax)),
		PerClient:  orDefault(q.MaxEventBytesPerClient, max(mcpserver.DefaultEventBytesPerClient, streamMax)),
	}
}

// limits returns the replica caps of q (defaults where unset).
func (q *ReplicaQuotas) limits() (sessions, jobs int) {
	if q == nil {
		q = &ReplicaQuotas{}
	}
	return orDefault(q.MaxSessionsPerReplica, host.DefaultStreamSessionsPerReplica), orDefault(q.MaxJobsPerReplica, host.DefaultJobsPerReplica)
}

// quotaField is a quota option: a count (v) or a size in bytes (size).
type quotaField struct {
	name string
	v    **int
	size **int64
}

func (q *Quotas) fields() []quotaField {
	return []quotaField{{name: "max_sessions_per_workspace", v: &q.MaxSessionsPerWorkspace}, {name: "max_sessions_per_agent", v: &q.MaxSessionsPerAgent},
		{name: "max_jobs_per_workspace", v: &q.MaxJobsPerWorkspace}, {name: "max_jobs_per_agent", v: &q.MaxJobsPerAgent},
		{name: "max_sessions_per_client", v: &q.MaxSessionsPerClient}, {name: "max_jobs_per_client", v: &q.MaxJobsPerClient},
		{name: "max_retained_jobs_per_client", v: &q.MaxRetainedJobsPerClient},
		{name: "max_retained_job_bytes_per_client", size: &q.MaxRetainedJobBytesPerClient},
		{name: "max_retained_jobs_per_workspace", v: &q.MaxRetainedJobsPerWorkspace}, {name: "max_retained_jobs_per_agent", v: &q.MaxRetainedJobsPerAgent},
		{name: "max_retained_job_bytes_per_workspace", size: &q.MaxRetainedJobBytesPerWorkspace},
		{name: "max_retained_job_bytes_per_agent", size: &q.MaxRetainedJobBytesPerAgent},
		{name: "max_event_bytes_per_session", size: &q.MaxEventBytesPerSession}, {name: "max_event_bytes_per_client", size: &q.MaxEventBytesPerClient}}
}

func (q *ReplicaQuotas) fields() []quotaField {
	return []quotaField{{name: "max_sessions_per_replica", v: &q.MaxSessionsPerReplica}, {name: "max_jobs_per_replica", v: &q.MaxJobsPerReplica}}
}

func validateQuotas(fields []quotaField) error {
	for _, f := range fields {
		if f.v != nil && *f.v != nil && **f.v < 0 {
			return fmt.Errorf("crank: quotas.%s: must not be negative (got %d)", f.name, **f.v)
		}
		if f.size != nil && *f.size != nil && **f.size < 0 {
			return fmt.Errorf("crank: quotas.%s: must not be negative (got %d)", f.name, **f.size)
		}
	}
	return nil
}

// validate checks the quotas; streamMax is what one stream's event log
// keeps (event_max_bytes), which an event-log quota must leave room for.
func (q *Quotas) validate(streamMax int64) error {
	if q == nil {
		q = &Quotas{}
	}
	if streamMax == 0 {
		streamMax = store.DefaultEventMaxBytes
	}
	if err := validateQuotas(q.fields()); err != nil {
		return err
	}
	ev := q.events(streamMax)
	for _, f := range []struct {
		name string
		v    int64
	}{{"max_event_bytes_per_session", ev.PerSession}, {"max_event_bytes_per_client", ev.PerClient}} {
		if f.v > 0 && f.v < streamMax {
			return fmt.Errorf("crank: quotas.%s: %d bytes is less than one stream's event log keeps (event_max_bytes %d): "+
				"raise it, lower event_max_bytes, or set 0 for no limit", f.name, f.v, streamMax)
		}
	}
	return nil
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
//	    max_sessions_per_workspace           <n>
//	    max_sessions_per_agent               <n>
//	    max_jobs_per_workspace               <n>
//	    max_jobs_per_agent                   <n>
//	    max_sessions_per_client              <n>
//	    max_jobs_per_client                  <n>
//	    max_retained_jobs_per_workspace      <n>
//	    max_retained_jobs_per_agent          <n>
//	    max_retained_job_bytes_per_workspace <size>
//	    max_retained_job_bytes_per_agent     <size>
//	    max_retained_jobs_per_client         <n>
//	    max_retained_job_bytes_per_client    <size>
//	    max_event_bytes_per_session          <size>
//	    max_event_bytes_per_client           <size>
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
		var field *quotaField
		for i, f := range fields {
			if f.name == name {
				field = &fields[i]
			}
		}
		if field == nil {
			return d.Errf("unrecognized quotas option %q", name)
		}
		var s string
		if !d.AllArgs(&s) {
			return d.ArgErr()
		}
		if field.size != nil {
			n, err := parseSize(s)
			if err != nil {
				return d.Errf("quotas %s: must be a size (e.g. 64MiB), 0 for unlimited (got %q)", name, s)
			}
			*field.size = &n
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return d.Errf("quotas %s: must be a whole number, 0 for unlimited (got %q)", name, s)
		}
		*field.v = &n
	}
	return nil
}
