package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// One replica of a fleet holds a duty at a time: another asking gets
// false while the holder lives, and takes the duty once the holder
// releases it or dies (its owner lease expires). A bad name is refused
// naming the rule.
func TestDutyHeldByOneReplica(t *testing.T) {
	t.Parallel()
	emb, a := storetest.Embedded(t)
	b := storetest.Open(t, emb, store.EtcdConfig{OwnerTTL: 2 * time.Second})
	c := storetest.Open(t, emb, store.EtcdConfig{OwnerTTL: 2 * time.Second})
	ctx := ctxT(t)
	const duty = "mesh:registry/agent"
	if _, err := a.HoldDuty(ctx, duty); err == nil || !strings.Contains(err.Error(), "letters, digits") {
		t.Fatalf("a bad duty name: %v", err)
	}
	const name = "mesh:crank-demo"
	hold := func(e *store.Etcd) bool {
		ok, err := e.HoldDuty(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !hold(b) || !hold(b) {
		t.Fatal("the first replica to ask does not hold the duty, or not on asking again")
	}
	if hold(a) || hold(c) {
		t.Fatal("a second replica holds the duty while the first lives")
	}
	if ok, _ := a.HoldDuty(ctx, "another-duty"); !ok {
		t.Fatal("a duty of another name is not free")
	}
	if err := b.ReleaseDuty(ctx, name); err != nil {
		t.Fatal(err)
	}
	if !hold(a) || hold(b) {
		t.Fatal("the duty did not pass on at its release")
	}
	if err := a.ReleaseDuty(ctx, name); err != nil {
		t.Fatal(err)
	}
	if !hold(c) {
		t.Fatal("the duty did not pass to the next replica")
	}
	store.Crash(c) // its owner lease expires about 2s later, and its lock key with it
	waitFor(t, 15*time.Second, "another replica takes the dead holder's duty", func() bool { return hold(b) })
	if hold(a) {
		t.Fatal("two replicas hold the duty")
	}
}
