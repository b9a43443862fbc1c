package store_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// A poll is not starved by a session whose items arrive without pause:
// a lost race starts again from the value the failed transaction read
// back, with the items it read already, so each retry is one round trip.
// (Before, every retry read the record and the items again, and a poll
// against a busy writer could fail "still contended after 16 attempts".)
func TestPollNotStarvedByAppends(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)
	s := newSession(t, st, func(ns *store.NewStreamSession) { ns.MaxItems = 100000; ns.MaxBytes = 64 << 20 })

	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	// One runner appending without pause, as a session's writer does
	// while its upstream produces faster than etcd commits.
	batch := make([][]byte, 50)
	for i := range batch {
		batch[i] = bytes.Repeat([]byte("x"), 2048)
	}
	wg.Go(func() {
		for wctx.Err() == nil {
			_, err := st.AppendStreamSessionItems(wctx, s.ID, store.Append{Items: batch})
			// As a session's writer does, it tries again after a full
			// buffer or a retryable error (the polls won every race).
			if err != nil && wctx.Err() == nil && !errors.Is(err, store.ErrBufferFull) && !store.Retryable(err) {
				t.Errorf("append: %v", err)
				return
			}
		}
	})
	cursor, last := "", uint64(0)
	for range 40 {
		res, err := st.PollStreamSession(ctx, ws1a1, s.ID, store.PollRequest{Cursor: cursor, MaxItems: 500})
		if err != nil {
			t.Fatalf("poll against continuous appends: %v", err)
		}
		for _, it := range res.Items {
			if it.Seq != last+1 {
				t.Fatalf("item %d after %d", it.Seq, last)
			}
			last = it.Seq
		}
		cursor = res.Cursor
	}
	stop()
	wg.Wait()
}
