package caddymodule

import (
	"fmt"
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/crankmcp/crank/host"
)

// Quotas bound the sessions and jobs open at once (zero: unlimited). The
// agent is the caller's identity: Caddy's authenticated user, else the
// agent_header, else the MCP session.
type Quotas struct {
	MaxSessionsPerWorkspace int `json:"max_sessions_per_workspace,omitempty"`
	MaxSessionsPerAgent     int `json:"max_sessions_per_agent,omitempty"`
	MaxJobsPerWorkspace     int `json:"max_jobs_per_workspace,omitempty"`
	MaxJobsPerAgent         int `json:"max_jobs_per_agent,omitempty"`
}

func (q *Quotas) host() host.Quotas {
	if q == nil {
		return host.Quotas{}
	}
	return host.Quotas{StreamSessionsPerWorkspace: q.MaxSessionsPerWorkspace, StreamSessionsPerAgent: q.MaxSessionsPerAgent,
		JobsPerWorkspace: q.MaxJobsPerWorkspace, JobsPerAgent: q.MaxJobsPerAgent}
}

func (q *Quotas) validate() error {
	if q == nil {
		return nil
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"max_sessions_per_workspace", q.MaxSessionsPerWorkspace}, {"max_sessions_per_agent", q.MaxSessionsPerAgent},
		{"max_jobs_per_workspace", q.MaxJobsPerWorkspace}, {"max_jobs_per_agent", q.MaxJobsPerAgent}} {
		if f.v < 0 {
			return fmt.Errorf("crank: quotas.%s: must not be negative (got %d)", f.name, f.v)
		}
	}
	return nil
}

// unmarshalQuotas reads a quotas block:
//
//	quotas {
//	    max_sessions_per_workspace <n>
//	    max_sessions_per_agent     <n>
//	    max_jobs_per_workspace     <n>
//	    max_jobs_per_agent         <n>
//	}
func unmarshalQuotas(d *caddyfile.Dispenser) (*Quotas, error) {
	q := &Quotas{}
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var dst *int
		switch d.Val() {
		case "max_sessions_per_workspace":
			dst = &q.MaxSessionsPerWorkspace
		case "max_sessions_per_agent":
			dst = &q.MaxSessionsPerAgent
		case "max_jobs_per_workspace":
			dst = &q.MaxJobsPerWorkspace
		case "max_jobs_per_agent":
			dst = &q.MaxJobsPerAgent
		default:
			return nil, d.Errf("unrecognized quotas option %q", d.Val())
		}
		name := d.Val()
		var s string
		if !d.AllArgs(&s) {
			return nil, d.ArgErr()
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return nil, d.Errf("quotas %s: must be a whole number, 0 for unlimited (got %q)", name, s)
		}
		*dst = n
	}
	return q, nil
}
