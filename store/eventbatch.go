package store

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/crankmcp/crank/internal/telemetry"
)

// StreamEvents is one stream's events for AppendStreams: Data are the
// events First, First+1, ... (First < 0: from the stream's next one), as
// for AppendEvents.
type StreamEvents struct {
	Session, Stream string
	First           int64
	Data            [][]byte
	// Request, with First 0, is the JSON-RPC id of the request the stream
	// answers, recorded with the stream (EventStream); with no Data,
	// only the stream's record is written (its events were refused).
	Request json.RawMessage
}

// maxStreamsTxnOps bounds the puts of one AppendStreams transaction, within
// etcd's default limit of 128 operations.
const maxStreamsTxnOps = 120

// AppendStreams stores the events of several streams as AppendEvents does
// for each, and returns one error per stream (nil: stored). The SSE event
// log appends each response stream's events right after it ends, so under
// load many short streams wait at once; those that simply grow share one
// transaction instead of one each: a stream this process has not seen that
// starts at 0 (a new stream), or one whose record this process wrote last,
// continued at its next index, in either case within its bounds. Any other
// stream (a restart, a gap, trimming, a stream seen twice) and every stream
// of a transaction whose compare failed (another replica wrote a record)
// goes through AppendEvents, in order.
func (e *Etcd) AppendStreams(ctx context.Context, streams []StreamEvents, lim EventLimits) []error {
	errs := make([]error, len(streams))
	dlim, err := lim.withDefaults()
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	var slow []int
	var txn []plannedAppend
	ops, size := 0, 0
	seen := make(map[string]bool, len(streams))
	owner, ownerKnown := "", false // the owner ID new streams record
	commit := func() {
		if len(txn) > 0 {
			slow = append(slow, e.commitStreams(ctx, streams, txn, dlim, errs)...)
		}
		txn, ops, size = nil, 0, 0
	}
	for i, s := range streams {
		if len(s.Data) == 0 && s.Request != nil {
			errs[i] = e.openEventStream(ctx, s, dlim)
			continue
		}
		mk := eventStreamKey(s.Session, s.Stream)
		if s.First == 0 && s.Request != nil && !ownerKnown {
			owner, ownerKnown = e.streamOwner(ctx), true
		}
		p, ok := e.planAppend(i, s, dlim, owner)
		if !ok || seen[mk] {
			seen[mk] = true
			slow = append(slow, i)
			continue
		}
		seen[mk] = true
		if ops+p.ops > maxStreamsTxnOps || size+p.size > e.maxValue {
			commit()
		}
		txn = append(txn, p)
		ops, size = ops+p.ops, size+p.size
	}
	commit()
	// The rest go one by one, in their given order: a stream given twice
	// keeps its order, as its first run committed above or is among these.
	slices.Sort(slow)
	for _, i := range slow {
		s := streams[i]
		_, errs[i] = e.appendStream(ctx, s.Session, s.Stream, s.First, s.Data, lim, s.Request)
	}
	return errs
}

// plannedAppend is a stream's share of an AppendStreams transaction.
type plannedAppend struct {
	i         int // index in the streams given
	mk, evp   string
	rev       int64 // the record's mod revision the transaction expects
	rec       eventStreamRecord
	from      uint64
	ops, size int
}

// planAppend reports whether s simply grows its stream, and how.
// owner is the owner ID a new stream records with its request.
func (e *Etcd) planAppend(i int, s StreamEvents, lim EventLimits, owner string) (plannedAppend, bool) {
	if validEventIDs(s.Session, s.Stream) != nil || len(s.Data) == 0 || 1+len(s.Data) > maxStreamsTxnOps {
		return plannedAppend{}, false // AppendEvents reports or splits it
	}
	p := plannedAppend{i: i, mk: eventStreamKey(s.Session, s.Stream), evp: eventsPrefix(s.Session, s.Stream), ops: 1 + len(s.Data)}
	var bytes int64
	for _, d := range s.Data {
		if len(d) > e.maxItem || int64(len(d)) > lim.MaxBytes {
			return plannedAppend{}, false
		}
		bytes += int64(len(d))
		p.size += len(p.evp) + 20 + len(d)
	}
	p.size += len(p.mk) + 64 // the record
	cached, ok := e.events.Get(p.mk)
	if !ok && s.First != 0 {
		return plannedAppend{}, false // an unknown stream's record must be read first
	}
	rec := cached.rec
	if s.First >= 0 && uint64(s.First) != rec.Next {
		return plannedAppend{}, false // a restart, a gap or a conflict
	}
	if s.First == 0 && s.Request != nil {
		rec.Request, rec.Owner = s.Request, owner
		p.size += len(s.Request) + len(owner)
	}
	if rec.Next == rec.First {
		rec.First, rec.Bytes = rec.Next, 0
	}
	p.from = rec.Next
	rec.Next += uint64(len(s.Data))
	rec.Bytes += bytes
	rec.At = time.Now().UnixMilli()
	if rec.Next-rec.First > uint64(lim.MaxEvents) || rec.Bytes > lim.MaxBytes || p.size > e.maxValue {
		return plannedAppend{}, false // trimming needed
	}
	p.rec, p.rev = rec, cached.rev
	return p, true
}

// commitStreams writes planned appends in one transaction and returns the
// indices of the streams to append one by one instead (the compare failed).
func (e *Etcd) commitStreams(ctx context.Context, streams []StreamEvents, txn []plannedAppend, lim EventLimits, errs []error) []int {
	op := "append events to " + strconv.Itoa(len(txn)) + " streams"
	var committed bool
	var rev int64
	err := e.do(ctx, op, func(ctx context.Context) error {
		return e.leases.withLease(ctx, lim.TTL, func(lease clientv3.LeaseID) error {
			cmps := make([]clientv3.Cmp, 0, len(txn))
			var puts []clientv3.Op
			for _, p := range txn {
				val, _ := e.encodeRecord(p.rec)
				cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(p.mk), "=", p.rev))
				puts = append(puts, clientv3.OpPut(p.mk, string(val), clientv3.WithLease(lease)))
				for j, d := range streams[p.i].Data {
					puts = append(puts, clientv3.OpPut(eventKey(p.evp, p.from+uint64(j)), string(d), clientv3.WithLease(lease)))
				}
			}
			resp, err := e.kv.Txn(ctx).If(cmps...).Then(puts...).Commit()
			if err != nil {
				return err
			}
			committed, rev = resp.Succeeded, resp.Header.GetRevision()
			return nil
		})
	})
	var retry []int
	for _, p := range txn {
		switch {
		case err != nil:
			e.events.Delete(p.mk)
			errs[p.i] = err
		case committed:
			e.events.Put(p.mk, cachedStream{rec: p.rec, rev: rev})
			n := 0
			for _, d := range streams[p.i].Data {
				n += len(d)
			}
			telemetry.EventLogWritten(len(streams[p.i].Data), n)
		default:
			e.events.Delete(p.mk)
			retry = append(retry, p.i)
		}
	}
	return retry
}
