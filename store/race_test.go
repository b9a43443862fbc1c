package store_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// Two pollers of a request/response session advance from the cursor they
// read: every round exactly one wins, the other is told (ErrConflict), and
// no advance is lost.
func TestRaceTwoPollersAdvance(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)
	s := newSession(t, st, func(ns *store.NewStreamSession) { ns.Cursor = "0" })

	var wins, conflicts atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 25 {
				cur, err := st.GetStreamSession(ctx, ws1a1, s.ID)
				if err != nil {
					t.Error(err)
					return
				}
				n, _ := strconv.Atoi(cur.Cursor)
				_, err = st.AdvanceStreamSession(ctx, ws1a1, s.ID, store.Advance{
					From: cur.Cursor, To: strconv.Itoa(n + 1), State: json.RawMessage(strconv.Itoa(n + 1)),
				})
				switch {
				case err == nil:
					wins.Add(1)
				case errors.Is(err, store.ErrConflict):
					conflicts.Add(1)
				default:
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	final, err := st.GetStreamSession(ctx, ws1a1, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if final.Cursor != strconv.FormatInt(wins.Load(), 10) || string(final.State) != final.Cursor {
		t.Fatalf("cursor %s, state %s after %d successful advances", final.Cursor, final.State, wins.Load())
	}
	t.Logf("%d advances won, %d lost races reported", wins.Load(), conflicts.Load())
}

// A runner appends while two pollers poll the same session: every item is
// delivered, in order per poller, none is lost, and the buffer accounting
// ends at zero.
func TestRaceTwoPollersBuffer(t *testing.T) {
	t.Parallel()
	emb, st := storetest.Embedded(t)
	other := storetest.Open(t, emb, store.EtcdConfig{}) // the second poller is another replica
	ctx := ctxT(t)
	const total = 300
	s := newSession(t, st, func(ns *store.NewStreamSession) { ns.Owned, ns.MaxItems = true, 50 })

	var wg sync.WaitGroup
	wg.Go(func() { // runner
		for next := 0; next < total; {
			var batch [][]byte
			for i := next; i < min(next+7, total); i++ {
				batch = append(batch, fmt.Appendf(nil, "item-%d", i+1))
			}
			n, err := st.AppendStreamSessionItems(ctx, s.ID, store.Append{Items: batch})
			next += n
			if errors.Is(err, store.ErrBufferFull) {
				time.Sleep(5 * time.Millisecond) // backpressure: wait for a poll
				continue
			}
			if err != nil {
				t.Errorf("append: %v", err)
				return
			}
		}
	})
	var mu sync.Mutex
	seen := map[uint64]int{}
	var staleCursors atomic.Int64
	for _, p := range []*store.Etcd{st, other} {
		wg.Go(func() {
			cursor, last := "", uint64(0)
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
				r, err := p.PollStreamSession(ctx, ws1a1, s.ID, store.PollRequest{Cursor: cursor, MaxItems: 10})
				if errors.Is(err, store.ErrConflict) {
					staleCursors.Add(1) // the other poller acknowledged past our cursor
					cursor, last = "", 0
					continue
				}
				if err != nil {
					t.Errorf("poll: %v", err)
					return
				}
				for _, it := range r.Items {
					if it.Seq <= last && last != 0 {
						t.Errorf("poller went backwards: %d after %d", it.Seq, last)
					}
					last = it.Seq
					if string(it.Data) != fmt.Sprintf("item-%d", it.Seq) {
						t.Errorf("item %d holds %q", it.Seq, it.Data)
					}
					mu.Lock()
					seen[it.Seq]++
					mu.Unlock()
				}
				cursor = r.Cursor
				if r.StreamSession.AckedSeq == total {
					return
				}
			}
			t.Error("pollers did not acknowledge every item in time")
		})
	}
	wg.Wait()
	for i := uint64(1); i <= total; i++ {
		if seen[i] == 0 {
			t.Fatalf("item %d was never delivered", i)
		}
	}
	final, err := st.GetStreamSession(ctx, ws1a1, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if final.LastSeq != total || final.AckedSeq != total || final.BufferedItems != 0 || final.BufferedBytes != 0 {
		t.Fatalf("final accounting: %+v", final)
	}
	t.Logf("%d items; %d stale-cursor conflicts reported", total, staleCursors.Load())
}

// Polls racing with a stop (and the runner's finish) never fail for another
// reason, and the session ends stopped with consistent accounting.
func TestRacePollVsStop(t *testing.T) {
	t.Parallel()
	emb, st := storetest.Embedded(t)
	other := storetest.Open(t, emb, store.EtcdConfig{})
	ctx := ctxT(t)

	for round := range 5 {
		s := newSession(t, st, func(ns *store.NewStreamSession) { ns.Owned = round%2 == 0 })
		if _, err := st.AppendStreamSessionItems(ctx, s.ID, store.Append{Items: items("a", "b", "c")}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 3 {
			wg.Go(func() {
				<-start
				cursor := ""
				for range 10 {
					r, err := other.PollStreamSession(ctx, ws1a1, s.ID, store.PollRequest{Cursor: cursor, MaxItems: 1})
					if errors.Is(err, store.ErrConflict) {
						cursor = ""
						continue
					}
					if err != nil {
						t.Errorf("poll: %v", err)
						return
					}
					cursor = r.Cursor
				}
			})
		}
		wg.Go(func() {
			<-start
			c, err := st.CloseStreamSession(ctx, ws1a1, s.ID, "race")
			if err != nil {
				t.Errorf("close: %v", err)
				return
			}
			if c.Status == store.StreamSessionStopping {
				if _, err := st.FinishStreamSession(ctx, s.ID, store.StreamSessionEnd{Status: store.StreamSessionStopped}); err != nil {
					t.Errorf("finish: %v", err)
				}
			}
		})
		close(start)
		wg.Wait()
		final, err := st.GetStreamSession(ctx, ws1a1, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		if final.Status != store.StreamSessionStopped || final.StopReason != "race" ||
			final.BufferedItems != int(final.LastSeq-final.AckedSeq) || final.Cursor != strconv.FormatUint(final.AckedSeq, 10) {
			t.Fatalf("round %d: final %+v", round, final)
		}
	}
}

// Cancel (from another replica) racing with the runner's finish: whichever
// commits first wins, the loser is told, and nothing is lost — the result
// of a finished job survives a late cancel, and a cancel that came first is
// recorded.
func TestRaceCancelVsFinish(t *testing.T) {
	t.Parallel()
	emb, runner := storetest.Embedded(t)
	client := storetest.Open(t, emb, store.EtcdConfig{})
	ctx := ctxT(t)

	outcomes := map[string]int{}
	for i := range 20 {
		j := newJob(t, runner, func(nj *store.NewJob) { nj.Owned = true })
		var cancelErr, finishErr error
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Go(func() {
			<-start
			_, cancelErr = client.CancelJob(ctx, ws1a1, j.ID, "user")
		})
		wg.Go(func() {
			<-start
			_, finishErr = runner.UpdateJob(ctx, j.ID, store.JobUpdate{
				Status: store.JobSucceeded, Result: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)),
			})
		})
		close(start)
		wg.Wait()
		if finishErr != nil {
			t.Fatalf("finish: %v", finishErr) // allowed from running and from canceling
		}
		final, err := client.GetJobResult(ctx, ws1a1, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if final.Status != store.JobSucceeded || string(final.Result) != fmt.Sprintf(`{"n":%d}`, i) {
			t.Fatalf("final %+v", final)
		}
		switch {
		case cancelErr == nil:
			// The cancel came first: it is on record.
			if final.CancelReason != "user" || final.CancelRequestedAt.IsZero() {
				t.Fatalf("accepted cancel not recorded: %+v", final)
			}
			outcomes["cancel first"]++
		case errors.Is(cancelErr, store.ErrIllegalTransition):
			if final.CancelReason != "" {
				t.Fatalf("refused cancel recorded: %+v", final)
			}
			outcomes["finish first"]++
		default:
			t.Fatalf("cancel: %v", cancelErr)
		}
	}
	t.Logf("outcomes: %v", outcomes)
}
