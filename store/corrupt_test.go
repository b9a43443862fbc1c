package store_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// A record that etcd hands back corrupt or forged — another entity's ID,
// an impossible event span — is an error naming it: never acted upon (a
// cancel of job A must not write job B) and never a panic.
func TestCorruptRecords(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)
	cli := store.EtcdClient(st)

	a := newJob(t, st, nil)
	b := newJob(t, st, nil)
	// A's key holds a record naming B.
	r, err := cli.Get(ctx, "/crank/v1/jobs/"+b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/crank/v1/jobs/"+a.ID, string(r.Kvs[0].Value), clientv3.WithIgnoreLease()); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"GetJob": func() error { _, err := st.GetJob(ctx, ws1a1, a.ID); return err }(),
		"CancelJob": func() error {
			_, err := st.CancelJob(ctx, ws1a1, a.ID, "forged")
			return err
		}(),
	} {
		if err == nil || errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "corrupt record") {
			t.Errorf("%s of a job whose record names another: %v", name, err)
		}
	}
	if got, err := st.GetJob(ctx, ws1a1, b.ID); err != nil || got.Status != store.JobQueued || got.CancelReason != "" {
		t.Fatalf("job B after a cancel of A's forged record: %+v, %v", got, err)
	}

	// An event stream record with an impossible span.
	if _, err := st.AppendEvents(ctx, "sess", "s1", 0, [][]byte{[]byte("e0")}, store.EventLimits{}); err != nil {
		t.Fatal(err)
	}
	forged, _ := json.Marshal(map[string]uint64{"first": 0, "next": 1 << 62})
	if _, err := cli.Put(ctx, "/crank/v1/streams/sess/s1", string(forged)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.EventsAfter(ctx, "sess", "s1", -1); err == nil || !strings.Contains(err.Error(), "corrupt record") {
		t.Fatalf("replay of a forged stream record: %v", err)
	}
}
