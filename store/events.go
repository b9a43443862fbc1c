package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/crankmcp/crank/internal/telemetry"
)

// streamsDir holds the SSE event logs; see the package documentation.
const streamsDir = "streams/"

// SSE event log bounds and defaults. A stream keeps at most MaxEvents
// events and MaxBytes bytes; the oldest go first.
const (
	DefaultEventMaxEvents = 1000
	DefaultEventMaxBytes  = 1 << 20
	DefaultEventTTL       = 30 * time.Minute
	MaxEventLogEvents     = 100_000
	MaxEventLogBytes      = 64 << 20
	// eventTrimBatch caps the oldest events read per trimming round.
	eventTrimBatch = 256
	// maxEventCache bounds the per-process cache of stream records.
	maxEventCache = 10_000
)

// ErrEventsPurged: the events a client asks to replay are no longer all
// there (trimmed by the retention bounds, expired, or never stored because
// an append failed), so no partial replay is possible.
var ErrEventsPurged = errors.New("store: events purged")

// ErrStreamNotStored: a replay names events of a stream the store holds
// no record of, or events past those it holds. It wraps ErrEventsPurged
// too: the stream expired, its replica died before storing them, or —
// which only time tells — the replica that serves it has not stored them
// yet.
var ErrStreamNotStored = errors.New("store: stream not stored")

// EventLimits bounds one SSE stream's event log. Zero fields take the
// defaults.
type EventLimits struct {
	// MaxEvents and MaxBytes bound what the stream retains; appending
	// beyond them drops the oldest events (about a tenth of the bound at
	// once, so trimming is rare).
	MaxEvents int
	MaxBytes  int64
	// TTL is how long an event (and the stream record, from its last
	// append) lives.
	TTL time.Duration
}

func (l EventLimits) withDefaults() (EventLimits, error) {
	if l.MaxEvents == 0 {
		l.MaxEvents = DefaultEventMaxEvents
	}
	if l.MaxBytes == 0 {
		l.MaxBytes = DefaultEventMaxBytes
	}
	if l.TTL == 0 {
		l.TTL = DefaultEventTTL
	}
	switch {
	case l.MaxEvents < 1 || l.MaxEvents > MaxEventLogEvents:
		return l, fmt.Errorf("store: %w: event max_events must be 1-%d, got %d", ErrInvalid, MaxEventLogEvents, l.MaxEvents)
	case l.MaxBytes < 1 || l.MaxBytes > MaxEventLogBytes:
		return l, fmt.Errorf("store: %w: event max_bytes must be 1-%d, got %d", ErrInvalid, MaxEventLogBytes, l.MaxBytes)
	case l.TTL < 0:
		return l, fmt.Errorf("store: %w: event TTL must be positive, got %s", ErrInvalid, l.TTL)
	}
	return l, nil
}

// eventStreamRecord is the stored JSON form of a stream's log position:
// events First..Next-1 may be retained (older ones may have expired), and
// Bytes is at least the size of those still there.
type eventStreamRecord struct {
	First uint64 `json:"first"`
	Next  uint64 `json:"next"`
	Bytes int64  `json:"bytes"`
	// Request is the JSON-RPC id of the request a POST stream answers,
	// recorded when the stream opens (StreamEvents.Request), so that a
	// replay that cannot be served answers that request with an error.
	Request json.RawMessage `json:"request,omitempty"`
	// Owner is the owner ID (owner.go) of the replica that opened the
	// stream with its Request: while owners/<Owner> lives, that replica
	// may still answer the call; once it is gone, nobody will.
	Owner string `json:"owner,omitempty"`
	// At is when the record was last written (Unix milliseconds).
	At int64 `json:"at,omitempty"`
}

// decodeEventStream decodes a stream record: a value that is not one, or
// whose span is impossible (first past next, more events than any stream
// keeps), is an error.
func decodeEventStream(val []byte) (eventStreamRecord, error) {
	var rec eventStreamRecord
	if err := checkFormat("stream record", val); err != nil {
		return rec, err
	}
	if err := json.Unmarshal(val, &rec); err != nil {
		return rec, fmt.Errorf("decode stream record: %w", err)
	}
	if rec.First > rec.Next || rec.Next-rec.First > MaxEventLogEvents {
		return eventStreamRecord{}, fmt.Errorf("decode stream record: corrupt record: first %d, next %d", rec.First, rec.Next)
	}
	return rec, nil
}

func streamsPrefix(session string) string { return streamsDir + url.PathEscape(session) + "/" }

// streamSegment path-escapes a stream ID; the standalone stream (ID "")
// is "%", which path escaping never produces.
func streamSegment(stream string) string {
	if stream == "" {
		return "%"
	}
	return url.PathEscape(stream)
}

func eventStreamKey(session, stream string) string {
	return streamsPrefix(session) + streamSegment(stream)
}
func eventsPrefix(session, stream string) string { return eventStreamKey(session, stream) + "/ev/" }
func eventKey(prefix string, n uint64) string    { return fmt.Sprintf("%s%020d", prefix, n) }

// The event cache (Etcd.events) remembers the last stream record this
// process wrote, with its mod revision, so that a replica appending to its
// own stream commits in one round trip instead of reading first. A stale
// entry only costs a failed compare and a re-read; at most maxEventCache
// are kept, the least recently used going first.
type cachedStream struct {
	rec eventStreamRecord
	rev int64
}

func validEventIDs(session, stream string) error {
	if !validID(session) {
		return fmt.Errorf("store: %w: session ID must be 1-%d bytes", ErrInvalid, maxIDLen)
	}
	if len(stream) > maxIDLen {
		return fmt.Errorf("store: %w: stream ID is %d bytes, over the %d-byte limit", ErrInvalid, len(stream), maxIDLen)
	}
	return nil
}

// maxEventsPerTxn keeps an append within etcd's default limit of 128
// operations per transaction (the record and a trim are two more).
const maxEventsPerTxn = 100

// AppendEvents stores data as the events first, first+1, ... of an MCP
// response stream's log (first < 0: from the next one) and returns the
// first one's index. Events of a stream are numbered from 0 by the caller;
// see EventLimits for the retention. An index beyond the next one (an
// earlier append failed) drops the events before it, since a replay across
// the gap would lose one. Index 0 starts the stream afresh (it was opened
// again, e.g. on another replica); any other index already stored is
// ErrConflict.
func (e *Etcd) AppendEvents(ctx context.Context, session, stream string, first int64, data [][]byte, lim EventLimits) (uint64, error) {
	return e.appendStream(ctx, session, stream, first, data, lim, nil)
}

// appendStream is AppendEvents, recording request with a stream that
// starts at event 0 (StreamEvents.Request).
func (e *Etcd) appendStream(ctx context.Context, session, stream string, first int64, data [][]byte, lim EventLimits, request json.RawMessage) (uint64, error) {
	if err := validEventIDs(session, stream); err != nil {
		return 0, err
	}
	lim, err := lim.withDefaults()
	if err != nil {
		return 0, err
	}
	if len(data) == 0 {
		return 0, fmt.Errorf("store: %w: no events to append", ErrInvalid)
	}
	for _, d := range data {
		if len(d) > e.maxItem || int64(len(d)) > lim.MaxBytes {
			return 0, fmt.Errorf("store: append event to stream %q of session %s: %w: event is %d bytes, over the limit (%d per event, max_bytes %d)",
				stream, MCPSessionDigest(session), ErrTooLarge, len(d), e.maxItem, lim.MaxBytes)
		}
	}
	// Split into transactions of at most maxEventsPerTxn events and one
	// request's bytes.
	var firstIdx uint64
	for i := 0; i < len(data); {
		j, size := i, 0
		for j < len(data) && j-i < maxEventsPerTxn && (j == i || size+len(data[j]) <= e.maxValue) {
			size += len(data[j])
			j++
		}
		idx, err := e.appendEvents(ctx, session, stream, first, data[i:j], lim, request)
		if err != nil {
			return 0, err
		}
		if i == 0 {
			firstIdx = idx
		}
		first, request = int64(idx)+int64(j-i), nil
		i = j
	}
	return firstIdx, nil
}

// appendEvents appends one transaction's worth of events.
func (e *Etcd) appendEvents(ctx context.Context, session, stream string, first int64, data [][]byte, lim EventLimits, request json.RawMessage) (uint64, error) {
	op := "append events to stream " + strconv.Quote(stream) + " of session " + MCPSessionDigest(session)
	mk := eventStreamKey(session, stream)
	evp := eventsPrefix(session, stream)
	for attempt := 0; attempt < casAttempts; attempt++ {
		cached, ok := e.events.Get(mk)
		if !ok && first == 0 && attempt == 0 {
			// A new stream: assume no record, which the compare checks.
			ok = true
		}
		if !ok {
			kv, err := e.get(ctx, op, mk)
			if err != nil {
				return 0, err
			}
			if kv != nil {
				if cached.rec, err = decodeEventStream(kv.Value); err != nil {
					return 0, fmt.Errorf("store: %s: %w", op, err)
				}
				cached.rev = kv.ModRevision
			}
		}
		rec := cached.rec
		idx := rec.Next
		if first >= 0 {
			idx = uint64(first)
		}
		restart := idx == 0 && rec.Next > 0
		if restart {
			// The stream was opened again (its session moved to another
			// replica): the old events' IDs mean nothing now.
			rec = eventStreamRecord{}
		}
		if idx == 0 && request != nil {
			rec.Request, rec.Owner = request, e.streamOwner(ctx)
		}
		if idx < rec.Next {
			return 0, fmt.Errorf("store: %s: %w: event %d is already stored (next is %d)", op, ErrConflict, idx, rec.Next)
		}
		// A batch larger than the bounds keeps only its newest events.
		batch, batchBytes := data, int64(0)
		for _, d := range batch {
			batchBytes += int64(len(d))
		}
		for len(batch) > 1 && (len(batch) > lim.MaxEvents || batchBytes > lim.MaxBytes) {
			batchBytes -= int64(len(batch[0]))
			batch = batch[1:]
		}
		from := idx + uint64(len(data)-len(batch))
		oldFirst := rec.First
		if from > rec.Next || rec.Next == rec.First {
			// A gap (an earlier append failed, or the batch was cut): what
			// came before can no longer be replayed without loss.
			rec.First, rec.Bytes = from, 0
		}
		rec.Next = from + uint64(len(batch))
		rec.Bytes += batchBytes
		rec.At = time.Now().UnixMilli()
		if err := e.trimEvents(ctx, op, evp, &rec, from, batchBytes, lim); err != nil {
			return 0, err
		}
		var committed bool
		var rev int64
		val, _ := e.encodeRecord(rec)
		err := e.do(ctx, op, func(ctx context.Context) error {
			return e.leases.withLease(ctx, lim.TTL, func(lease clientv3.LeaseID) error {
				ops := []clientv3.Op{clientv3.OpPut(mk, string(val), clientv3.WithLease(lease))}
				for i, d := range batch {
					ops = append(ops, clientv3.OpPut(eventKey(evp, from+uint64(i)), string(d), clientv3.WithLease(lease)))
				}
				if restart {
					if from > 0 {
						ops = append(ops, clientv3.OpDelete(eventKey(evp, 0), clientv3.WithRange(eventKey(evp, from))))
					}
					ops = append(ops, clientv3.OpDelete(eventKey(evp, rec.Next), clientv3.WithRange(clientv3.GetPrefixRangeEnd(evp))))
				} else if rec.First > oldFirst {
					ops = append(ops, clientv3.OpDelete(eventKey(evp, oldFirst), clientv3.WithRange(eventKey(evp, rec.First))))
				}
				resp, err := e.kv.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(mk), "=", cached.rev)).Then(ops...).Commit()
				if err != nil {
					return err
				}
				committed, rev = resp.Succeeded, resp.Header.GetRevision()
				return nil
			})
		})
		if err != nil {
			e.events.Delete(mk)
			return 0, err
		}
		if committed {
			e.wrote()
			e.events.Put(mk, cachedStream{rec: rec, rev: rev})
			telemetry.EventLogWritten(len(batch), int(batchBytes))
			return idx, nil
		}
		e.events.Delete(mk)
		if !casBackoff.Wait(ctx, attempt+1) {
			return 0, fmt.Errorf("store: %s: %w", op, ctx.Err())
		}
	}
	return 0, fmt.Errorf("store: %s: %w: still contended after %d attempts", op, ErrConflict, casAttempts)
}

// trimEvents moves rec.First forward until the stream (with the events
// from..rec.Next-1 being appended, newBytes in all) fits its bounds,
// dropping a tenth more than needed so that trimming is rare. It reads the
// oldest events to learn their sizes. Events that expired on their own
// still count in rec.Bytes until trimming passes them, so Bytes errs on the
// high side and the stream never holds more than its bounds.
func (e *Etcd) trimEvents(ctx context.Context, op, evp string, rec *eventStreamRecord, from uint64, newBytes int64, lim EventLimits) error {
	if rec.Next-rec.First <= uint64(lim.MaxEvents) && rec.Bytes <= lim.MaxBytes {
		return nil
	}
	wantCount := uint64(lim.MaxEvents) - uint64(lim.MaxEvents)/10
	wantBytes := lim.MaxBytes - lim.MaxBytes/10
	over := func() bool { return rec.Next-rec.First > wantCount || rec.Bytes > wantBytes }
	for rec.First < from && over() {
		type old struct {
			seq  uint64
			size int
		}
		var olds []old
		err := e.do(ctx, op, func(ctx context.Context) error {
			resp, err := e.kv.Get(ctx, eventKey(evp, rec.First), clientv3.WithRange(eventKey(evp, from)), clientv3.WithLimit(eventTrimBatch))
			if err != nil {
				return err
			}
			for _, kv := range resp.Kvs {
				seq, err := strconv.ParseUint(strings.TrimPrefix(string(kv.Key), evp), 10, 64)
				if err != nil {
					return fmt.Errorf("malformed event key %q", strings.TrimPrefix(string(kv.Key), evp))
				}
				olds = append(olds, old{seq, len(kv.Value)})
			}
			return nil
		})
		if err != nil {
			return err
		}
		if len(olds) == 0 {
			rec.First = from // every older event has expired
			break
		}
		for _, o := range olds {
			if !over() {
				break
			}
			rec.First = o.seq + 1
			rec.Bytes -= int64(o.size)
		}
	}
	if rec.First >= from {
		// Only the new events are left; reset the byte count that expired
		// events may have left behind.
		rec.First, rec.Bytes = from, newBytes
	}
	return nil
}

// EventsAfter returns the stream's events after index (-1: all), or
// ErrEventsPurged when one of them is no longer stored: never a partial
// replay.
func (e *Etcd) EventsAfter(ctx context.Context, session, stream string, index int64) ([][]byte, error) {
	if err := validEventIDs(session, stream); err != nil {
		return nil, err
	}
	if index < -1 {
		return nil, fmt.Errorf("store: %w: event index must be at least -1, got %d", ErrInvalid, index)
	}
	op := "replay stream " + strconv.Quote(stream) + " of session " + MCPSessionDigest(session)
	mk := eventStreamKey(session, stream)
	evp := eventsPrefix(session, stream)
	want := uint64(index + 1)
	var resp *clientv3.TxnResponse
	err := e.read(ctx, op, func(ctx context.Context, rd clientv3.KV) error {
		var err error
		resp, err = rd.Txn(ctx).Then(
			clientv3.OpGet(mk),
			clientv3.OpGet(eventKey(evp, want), clientv3.WithRange(clientv3.GetPrefixRangeEnd(evp))),
		).Commit()
		return err
	})
	if err != nil {
		return nil, err
	}
	metas := resp.Responses[0].GetResponseRange().GetKvs()
	if len(metas) == 0 {
		if index < 0 {
			return nil, nil // nothing was ever stored on this stream
		}
		return nil, fmt.Errorf("store: %s after event %d: %w: %w (it has expired, or is not stored yet)", op, index, ErrEventsPurged, ErrStreamNotStored)
	}
	rec, err := decodeEventStream(metas[0].Value)
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", op, err)
	}
	if want > rec.Next {
		return nil, fmt.Errorf("store: %s after event %d: %w: %w (events from %d on were never stored, or are not stored yet)", op, index, ErrEventsPurged, ErrStreamNotStored, rec.Next)
	}
	if want == rec.Next {
		return nil, nil
	}
	if want < rec.First {
		return nil, fmt.Errorf("store: %s after event %d: %w (the oldest retained event is %d)", op, index, ErrEventsPurged, rec.First)
	}
	kvs := resp.Responses[1].GetResponseRange().GetKvs()
	out := make([][]byte, 0, min(rec.Next-want, uint64(len(kvs))))
	for i, kv := range kvs {
		seq, err := strconv.ParseUint(strings.TrimPrefix(string(kv.Key), evp), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("store: %s: malformed event key %q", op, strings.TrimPrefix(string(kv.Key), evp))
		}
		if seq >= rec.Next {
			break
		}
		if seq != want+uint64(i) {
			return nil, fmt.Errorf("store: %s after event %d: %w (event %d has expired)", op, index, ErrEventsPurged, want+uint64(i))
		}
		out = append(out, kv.Value)
	}
	if uint64(len(out)) != rec.Next-want {
		return nil, fmt.Errorf("store: %s after event %d: %w (event %d has expired)", op, index, ErrEventsPurged, want+uint64(len(out)))
	}
	return out, nil
}

// EventStreamInfo is what the store knows of a stream a replay found
// without its answer (EventStream).
type EventStreamInfo struct {
	// Request is the JSON-RPC id of the request the stream answers, as
	// recorded when it opened (nil when none was, or the stream is not
	// stored).
	Request json.RawMessage
	// Next is the index of the stream's next event: a client that has
	// every event before it waits for the rest.
	Next uint64
	// Orphaned: the replica that opened the stream is gone (its owner
	// lease expired or was revoked), so no more of the stream's events,
	// its answer among them, will be stored.
	Orphaned bool
	// Idle is how long ago the stream's record was last written.
	Idle time.Duration
}

// EventStream returns what the store knows of a stream: the request it
// answers, its next index, whether the replica that opened it is gone and
// how long it has been idle. A stream without record is the zero value.
func (e *Etcd) EventStream(ctx context.Context, session, stream string) (EventStreamInfo, error) {
	if err := validEventIDs(session, stream); err != nil {
		return EventStreamInfo{}, err
	}
	op := "read stream " + strconv.Quote(stream) + " of session " + MCPSessionDigest(session)
	kv, err := e.get(ctx, op, eventStreamKey(session, stream))
	if err != nil || kv == nil {
		return EventStreamInfo{}, err
	}
	rec, err := decodeEventStream(kv.Value)
	if err != nil {
		return EventStreamInfo{}, fmt.Errorf("store: read stream %q: %w", stream, err)
	}
	info := EventStreamInfo{Request: rec.Request, Next: rec.Next}
	if rec.At > 0 {
		info.Idle = max(0, time.Since(time.UnixMilli(rec.At)))
	}
	if rec.Owner != "" && wellFormedID(rec.Owner, ownerIDPrefix) {
		owner, err := e.get(ctx, op, ownerKey(rec.Owner))
		if err != nil {
			return EventStreamInfo{}, err
		}
		info.Orphaned = owner == nil
	}
	return info, nil
}

// streamOwner is the owner ID a stream opened here records (registering
// this replica as an owner first, once): "" when it cannot register, and
// the stream then records none.
func (e *Etcd) streamOwner(ctx context.Context) string {
	o, err := e.owner(ctx)
	if err != nil {
		return ""
	}
	return o.id
}

// openEventStream writes the record of a stream none of whose events is
// stored (an event-log quota refused them), for its request: a stream
// already stored is left alone.
func (e *Etcd) openEventStream(ctx context.Context, s StreamEvents, lim EventLimits) error {
	if err := validEventIDs(s.Session, s.Stream); err != nil {
		return err
	}
	mk := eventStreamKey(s.Session, s.Stream)
	rec := eventStreamRecord{Request: s.Request, Owner: e.streamOwner(ctx), At: time.Now().UnixMilli()}
	val, _ := e.encodeRecord(rec)
	if len(val) > e.maxValue {
		return fmt.Errorf("store: open stream %q: %w: request id is %d bytes", s.Stream, ErrTooLarge, len(s.Request))
	}
	return e.do(ctx, "open stream "+strconv.Quote(s.Stream)+" of session "+MCPSessionDigest(s.Session), func(ctx context.Context) error {
		return e.leases.withLease(ctx, lim.TTL, func(lease clientv3.LeaseID) error {
			resp, err := e.kv.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(mk), "=", 0)).
				Then(clientv3.OpPut(mk, string(val), clientv3.WithLease(lease))).Commit()
			if err == nil && resp.Succeeded {
				e.events.Put(mk, cachedStream{rec: rec, rev: resp.Header.GetRevision()})
			}
			return err
		})
	})
}

// DeleteEventStreams removes every event log of the MCP session.
func (e *Etcd) DeleteEventStreams(ctx context.Context, session string) error {
	if !validID(session) {
		return nil
	}
	p := streamsPrefix(session)
	e.events.DeleteFunc(func(k string, _ cachedStream) bool { return strings.HasPrefix(k, p) })
	// Sessions close when the process shuts down, too: give up at once
	// when the store closes (the logs expire on their own).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(e.bgCtx, cancel)()
	return e.do(ctx, "delete event streams of session "+MCPSessionDigest(session), func(ctx context.Context) error {
		_, err := e.kv.Delete(ctx, p, clientv3.WithPrefix())
		return err
	})
}

// DeleteEventStream removes one stream's event log: a resume from any of
// its events fails after it, as after trimming.
func (e *Etcd) DeleteEventStream(ctx context.Context, session, stream string) error {
	if err := validEventIDs(session, stream); err != nil {
		return err
	}
	mk := eventStreamKey(session, stream)
	e.events.Delete(mk)
	return e.do(ctx, "delete event stream "+strconv.Quote(stream)+" of session "+truncate(session), func(ctx context.Context) error {
		_, err := e.kv.Txn(ctx).Then(clientv3.OpDelete(mk), clientv3.OpDelete(eventsPrefix(session, stream), clientv3.WithPrefix())).Commit()
		return err
	})
}
