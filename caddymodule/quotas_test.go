package caddymodule

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/crankmcp/crank/host"
)

// A handler without quotas gets non-zero defaults, one that sets a quota
// to 0 gets no limit, and every host shares the process's replica caps.
func TestQuotaDefaults(t *testing.T) {
	got := (*Quotas)(nil).host()
	want := host.Quotas{
		StreamSessionsPerWorkspace: host.DefaultStreamSessionsPerWorkspace, StreamSessionsPerAgent: host.DefaultStreamSessionsPerAgent,
		JobsPerWorkspace: host.DefaultJobsPerWorkspace, JobsPerAgent: host.DefaultJobsPerAgent, Replica: replicaLimits,
	}
	if got != want || want.StreamSessionsPerAgent == 0 || want.JobsPerAgent == 0 {
		t.Fatalf("no quotas configured: %+v, want the defaults %+v", got, want)
	}
	var q Quotas
	if err := json.Unmarshal([]byte(`{"max_sessions_per_agent": 0, "max_jobs_per_workspace": 7}`), &q); err != nil {
		t.Fatal(err)
	}
	got = q.host()
	if got.StreamSessionsPerAgent != 0 || got.JobsPerWorkspace != 7 || got.StreamSessionsPerWorkspace != host.DefaultStreamSessionsPerWorkspace {
		t.Fatalf("explicit quotas: %+v", got)
	}
	if s, j := (*ReplicaQuotas)(nil).limits(); s != host.DefaultStreamSessionsPerReplica || j != host.DefaultJobsPerReplica || s == 0 || j == 0 {
		t.Fatalf("replica caps by default: %d, %d", s, j)
	}
	zero := 0
	if s, j := (&ReplicaQuotas{MaxSessionsPerReplica: &zero}).limits(); s != 0 || j != host.DefaultJobsPerReplica {
		t.Fatalf("replica caps with sessions 0: %d, %d", s, j)
	}
}

func TestValidateReplicaQuotas(t *testing.T) {
	var cfg caddy.Config
	if err := json.Unmarshal([]byte(`{"admin": {"disabled": true}, "apps": {"crank": {"quotas": {"max_jobs_per_replica": -1}}}}`), &cfg); err != nil {
		t.Fatal(err)
	}
	if err := caddy.Validate(&cfg); err == nil || !strings.Contains(err.Error(), "quotas.max_jobs_per_replica: must not be negative") {
		t.Fatalf("a negative replica cap: %v", err)
	}
}
