package store_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// Store operations on embedded etcd (fsync off, as in every test):
//
//	go test -run '^$' -bench . -benchtime 2000x ./store/
//
// Each sub-benchmark reports ops/s, p50 and p99 latency, and x-put: its mean
// latency as a multiple of one raw etcd put of a session-sized record (no
// lease, no transaction) measured in the same run — the floor any store
// write pays.

// latencies records per-operation latencies and reports them.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) mean() time.Duration {
	var sum time.Duration
	for _, d := range l.d {
		sum += d
	}
	return sum / time.Duration(max(1, len(l.d)))
}

func (l *latencies) report(b *testing.B, elapsed time.Duration, baseline time.Duration) {
	slices.Sort(l.d)
	n := len(l.d)
	if n == 0 {
		return
	}
	b.ReportMetric(float64(n)/elapsed.Seconds(), "ops/s")
	b.ReportMetric(float64(l.d[n/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(l.d[(n*99)/100].Microseconds())/1000, "p99-ms")
	if baseline > 0 {
		b.ReportMetric(float64(l.mean())/float64(baseline), "x-put")
	}
}

// timed runs op b.N times, recording each latency.
func timed(b *testing.B, baseline time.Duration, op func(i int) error) {
	var l latencies
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := op(i); err != nil {
			b.Fatal(err)
		}
		l.add(time.Since(t0))
	}
	elapsed := time.Since(start)
	b.StopTimer()
	l.report(b, elapsed, baseline)
}

// rawPutBaseline measures the mean latency of plain puts of a session-sized
// value.
func rawPutBaseline(b *testing.B, cli *clientv3.Client) time.Duration {
	val := strings.Repeat("v", 600)
	var l latencies
	for i := range 300 {
		t0 := time.Now()
		if _, err := cli.Put(context.Background(), fmt.Sprintf("/bench/put/%d", i), val); err != nil {
			b.Fatal(err)
		}
		l.add(time.Since(t0))
	}
	return l.mean()
}

func BenchmarkStore(b *testing.B) {
	emb, st := storetest.Embedded(b)
	cli := store.EtcdClient(st)
	ctx := context.Background()
	baseline := rawPutBaseline(b, cli)
	b.Logf("baseline: raw etcd put of 600 bytes, mean %s", baseline)
	ns := store.NewStreamSession{Scope: ws1a1, OperationID: "logs.follow", Protocol: "rest", Mode: "session",
		IdleTimeout: 5 * time.Minute, MaxLifetime: time.Hour, MaxItems: 1 << 16, MaxBytes: 64 << 20}

	b.Run("raw-put", func(b *testing.B) {
		val := strings.Repeat("v", 600)
		timed(b, baseline, func(i int) error {
			_, err := cli.Put(ctx, fmt.Sprintf("/bench/put2/%d", i), val)
			return err
		})
	})
	b.Run("create", func(b *testing.B) {
		timed(b, baseline, func(int) error { _, err := st.CreateStreamSession(ctx, ns); return err })
	})
	b.Run("create-owned", func(b *testing.B) {
		o := ns
		o.Owned = true
		timed(b, baseline, func(int) error { _, err := st.CreateStreamSession(ctx, o); return err })
	})
	s, err := st.CreateStreamSession(ctx, ns)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("get", func(b *testing.B) {
		timed(b, baseline, func(int) error { _, err := st.GetStreamSession(ctx, ws1a1, s.ID); return err })
	})
	b.Run("advance", func(b *testing.B) {
		o := ns
		o.Cursor = "0"
		a, err := st.CreateStreamSession(ctx, o)
		if err != nil {
			b.Fatal(err)
		}
		timed(b, baseline, func(i int) error {
			_, err := st.AdvanceStreamSession(ctx, ws1a1, a.ID, store.Advance{From: fmt.Sprint(i), To: fmt.Sprint(i + 1)})
			return err
		})
	})
	// A poll that acknowledges the previous page and returns one new item.
	b.Run("poll", func(b *testing.B) {
		o := ns
		o.Owned = true
		p, err := st.CreateStreamSession(ctx, o)
		if err != nil {
			b.Fatal(err)
		}
		item := [][]byte{[]byte(strings.Repeat("i", 200))}
		for range b.N {
			if _, err := st.AppendStreamSessionItems(ctx, p.ID, store.Append{Items: item}); err != nil {
				b.Fatal(err)
			}
		}
		cursor := ""
		timed(b, baseline, func(int) error {
			r, err := st.PollStreamSession(ctx, ws1a1, p.ID, store.PollRequest{Cursor: cursor, MaxItems: 1})
			if err == nil {
				cursor = r.Cursor
			}
			return err
		})
	})
	b.Run("append", func(b *testing.B) {
		o := ns
		o.Owned = true
		p, err := st.CreateStreamSession(ctx, o)
		if err != nil {
			b.Fatal(err)
		}
		item := [][]byte{[]byte(strings.Repeat("i", 200))}
		timed(b, baseline, func(int) error {
			_, err := st.AppendStreamSessionItems(ctx, p.ID, store.Append{Items: item})
			return err
		})
	})
	b.Run("job-update", func(b *testing.B) {
		j, err := st.CreateJob(ctx, store.NewJob{Scope: ws1a1, OperationID: "op", MaxRuntime: time.Hour, Owned: true})
		if err != nil {
			b.Fatal(err)
		}
		timed(b, baseline, func(i int) error {
			_, err := st.UpdateJob(ctx, j.ID, store.JobUpdate{Progress: fmt.Appendf(nil, `{"n":%d}`, i)})
			return err
		})
	})
	// Throughput with 16 concurrent callers on two replicas (two clients).
	other := storetest.Open(b, emb, store.EtcdConfig{})
	b.Run("create-parallel-16", func(b *testing.B) {
		var l latencies
		b.SetParallelism(8) // 8 × GOMAXPROCS goroutines; 16 on two cores
		b.ResetTimer()
		start := time.Now()
		var n sync.Mutex
		flip := false
		b.RunParallel(func(pb *testing.PB) {
			n.Lock()
			mine := st
			if flip {
				mine = other
			}
			flip = !flip
			n.Unlock()
			for pb.Next() {
				t0 := time.Now()
				if _, err := mine.CreateStreamSession(ctx, ns); err != nil {
					b.Error(err)
					return
				}
				l.add(time.Since(t0))
			}
		})
		elapsed := time.Since(start)
		b.StopTimer()
		l.report(b, elapsed, baseline)
	})
}

// BenchmarkStreamSessionFootprint reports what sessions cost etcd: keys per
// lease (lease sharing) and bytes per session (record, and record plus a
// 3-item buffer of 100-byte items, keys included).
func BenchmarkStreamSessionFootprint(b *testing.B) {
	_, st := storetest.Embedded(b)
	cli := store.EtcdClient(st)
	ctx := context.Background()
	ns := store.NewStreamSession{Scope: ws1a1, OperationID: "logs.follow", Protocol: "rest", Mode: "session",
		IdleTimeout: 5 * time.Minute, MaxLifetime: time.Hour, Owned: true}
	item := []byte(strings.Repeat("i", 100))
	b.ResetTimer()
	for range b.N {
		s, err := st.CreateStreamSession(ctx, ns)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := st.AppendStreamSessionItems(ctx, s.ID, store.Append{Items: [][]byte{item, item, item}}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	size := func(prefix string) (keys, bytes int, leased map[int64]int) {
		leased = map[int64]int{}
		r, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
		if err != nil {
			b.Fatal(err)
		}
		for _, kv := range r.Kvs {
			bytes += len(kv.Key) + len(kv.Value)
			if kv.Lease != 0 {
				leased[kv.Lease]++
			}
		}
		return len(r.Kvs), bytes, leased
	}
	nRec, recBytes, recLeases := size("/crank/v1/stream-sessions/")
	nItems, itemBytes, itemLeases := size("/crank/v1/stream-items/")
	nIdx, idxBytes, idxLeases := size("/crank/v1/running/")
	leases := map[int64]bool{}
	for _, m := range []map[int64]int{recLeases, itemLeases, idxLeases} {
		for id := range m {
			leases[id] = true
		}
	}
	keys := nRec + nItems + nIdx
	b.ReportMetric(float64(keys)/float64(max(1, len(leases))), "keys/lease")
	b.ReportMetric(float64(len(leases)), "leases")
	b.ReportMetric(float64(recBytes)/float64(b.N), "bytes/session")
	b.ReportMetric(float64(recBytes+itemBytes+idxBytes)/float64(b.N), "bytes/session+3items")
	b.Logf("%d sessions: %d records, %d items, %d index keys on %d leases", b.N, nRec, nItems, nIdx, len(leases))
}
