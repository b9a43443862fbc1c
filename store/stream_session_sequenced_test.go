package store_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// A sequenced append is exactly-once: a runner that retries a batch whose
// write it could not confirm (etcd lost its leader as it committed) finds
// the items it stored counted as taken, not stored twice; an append that
// would leave a hole is refused.
func TestStreamSessionSequencedAppend(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)
	s := newSession(t, st, nil)

	if n, err := st.AppendStreamSessionItems(ctx, s.ID, store.Append{Items: items("1", "2", "3"), Sequenced: true}); err != nil || n != 3 {
		t.Fatalf("first append: %d, %v", n, err)
	}
	// The retry of an append that was stored after all, grown by one item.
	if n, err := st.AppendStreamSessionItems(ctx, s.ID, store.Append{Items: items("1", "2", "3", "4"), Sequenced: true}); err != nil || n != 4 {
		t.Fatalf("retried append: %d, %v", n, err)
	}
	// Nothing new at all: every item is taken already.
	if n, err := st.AppendStreamSessionItems(ctx, s.ID, store.Append{Items: items("3", "4"), Sequenced: true, First: 2}); err != nil || n != 2 {
		t.Fatalf("repeated append: %d, %v", n, err)
	}
	if n, err := st.AppendStreamSessionItems(ctx, s.ID, store.Append{Items: items("5"), Sequenced: true, First: 4}); err != nil || n != 1 {
		t.Fatalf("next append: %d, %v", n, err)
	}
	if _, err := st.AppendStreamSessionItems(ctx, s.ID, store.Append{Items: items("9"), Sequenced: true, First: 8}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("append after a hole: %v", err)
	}
	res, err := st.PollStreamSession(ctx, ws1a1, s.ID, store.PollRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range res.Items {
		got = append(got, string(it.Data))
	}
	if fmt.Sprint(got) != "[1 2 3 4 5]" {
		t.Fatalf("items: %v", got)
	}
}
