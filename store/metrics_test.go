package store_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/crankmcp/crank/internal/telemetry"
	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// counterValue is the value of the series of name with the given labels
// in a gather of telemetry's collectors (a histogram's sample count), 0
// when there is none yet.
func counterValue(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := telemetry.Register(reg); err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if matches(m, labels) {
				if m.Counter != nil {
					return m.GetCounter().GetValue()
				}
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

func matches(m *dto.Metric, labels map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := labels[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(labels)
}

// The sweep of a dead replica's jobs counts them as owner-lost failures,
// and etcd requests are timed by RPC.
func TestSweepMetrics(t *testing.T) {
	t.Parallel()
	emb, _ := storetest.Embedded(t)
	a := storetest.Open(t, emb, store.EtcdConfig{})
	b := storetest.Open(t, emb, store.EtcdConfig{})
	ctx := ctxT(t)
	failed := map[string]string{"kind": "job", "action": "failed"}
	before := counterValue(t, "crank_owner_lost_total", failed)
	txns := counterValue(t, "crank_etcd_request_duration_seconds", map[string]string{"operation": "Txn"})
	for range 3 {
		newJob(t, a, func(nj *store.NewJob) { nj.Owned = true; nj.MaxRuntime = time.Hour })
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := b.SweepOrphans(ctx, nil)
	if err != nil || rep.Failed != 3 {
		t.Fatalf("sweep: %+v, %v", rep, err)
	}
	// Other tests sweep in this process too: at least these three.
	if got := counterValue(t, "crank_owner_lost_total", failed); got < before+3 {
		t.Errorf("owner lost failures %v, want at least %v", got, before+3)
	}
	if got := counterValue(t, "crank_etcd_request_duration_seconds", map[string]string{"operation": "Txn"}); got < txns+6 {
		t.Errorf("etcd Txn requests timed: %v, want at least %v", got, txns+6)
	}
}
