package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Record formats. Every JSON record the store writes says its format
// version as its first member, "v" ({"v":2,…}); a record without one is
// format 1, what every release before formats were numbered wrote. A
// release reads the formats from the previous release's (OldestFormat) up
// to its own (FormatVersion), and writes the newest one that every live
// replica of the fleet reads: each replica advertises the newest format it
// reads in its owner record (owners/<id>, "reads"; a record without it is
// a replica that reads format 1 only), and a replica writes format 1 until
// it has seen the fleet's owner records, and again whenever an older
// replica joins (a rollback). So during a rolling upgrade the fleet keeps
// writing what its oldest replica reads, and moves up once no older
// replica is left.
//
// Format 2 has the fields of format 1 and its "v" member, which a release
// reading format 1 ignores: the first format change that an older release
// could not read is the next one, and this mechanism is what keeps a
// replica from writing it while such a release lives. A record of a
// format newer than a replica reads is an error naming both, never a
// record to act on.
//
// Index entries (running/, signals/, active/, job-list/, retained/,
// mcp-session-index/: empty values or bare IDs), a job's stored result
// and a catalog's document (its version record says its format) and an
// SSE event's data are not records and carry no version: their layout is
// the key prefix's (/crank/v1/).
const (
	// FormatVersion is the newest record format this release reads and
	// the one it writes once every replica reads it.
	FormatVersion = 2
	// OldestFormat is the oldest record format this release reads: the
	// previous release's.
	OldestFormat = 1
)

// formatMember is how a versioned record starts.
const formatMember = `{"v":`

// RecordFormat is the format version of a stored record: its leading "v"
// member, 1 without one, 0 when the member is not a positive number.
func RecordFormat(val []byte) int {
	rest, ok := bytes.CutPrefix(val, []byte(formatMember))
	if !ok {
		return 1
	}
	end := bytes.IndexAny(rest, ",}")
	if end <= 0 {
		return 0
	}
	n, err := strconv.Atoi(string(rest[:end]))
	if err != nil || n < 1 {
		return 0
	}
	return n
}

// stampFormat returns the JSON object b as a record of format f: with a
// leading "v" member from format 2 on, unchanged as format 1.
func stampFormat(b []byte, f int) []byte {
	if f <= 1 || len(b) < 2 || b[0] != '{' {
		return b
	}
	head := formatMember + strconv.Itoa(f)
	out := make([]byte, 0, len(head)+len(b))
	out = append(out, head...)
	if len(b) > 2 {
		out = append(out, ',')
	}
	return append(out, b[1:]...)
}

// checkFormat refuses a record of a format this release does not read.
func checkFormat(what string, val []byte) error {
	switch f := RecordFormat(val); {
	case f == 0:
		return fmt.Errorf("store: decode %s: corrupt record: its format version \"v\" is not a positive number", what)
	case f > FormatVersion:
		return fmt.Errorf("store: decode %s: record of format %d, newer than this release reads (%d-%d): a replica of a later release wrote it; upgrade this replica",
			what, f, OldestFormat, FormatVersion)
	}
	return nil
}

// decodeRecord decodes the record val into r after checking its format;
// what names it in errors.
func decodeRecord(what string, val []byte, r any) error {
	if err := checkFormat(what, val); err != nil {
		return err
	}
	if err := json.Unmarshal(val, r); err != nil {
		return fmt.Errorf("store: decode %s: %w", what, err)
	}
	return nil
}

// encodeRecord is r's JSON in the format the fleet reads (WriteFormat).
func (e *Etcd) encodeRecord(r any) ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	return stampFormat(b, e.WriteFormat()), nil
}

// fleetFormats follows the formats the fleet's replicas read, from their
// owner records.
type fleetFormats struct {
	start sync.Once
	// write is the format to write, 0 until the owner records were read.
	write atomic.Int32
	// reads: owner key → the newest format that replica reads.
	mu    sync.Mutex
	reads map[string]int
}

// WriteFormat is the record format this replica writes now: the newest
// that every live replica reads (FormatVersion once the oldest is of this
// release), OldestFormat until the fleet's owner records were read.
func (e *Etcd) WriteFormat() int {
	e.fleet.start.Do(func() { go e.followFleet(e.bgCtx) })
	if f := int(e.fleet.write.Load()); f > 0 {
		return f
	}
	return OldestFormat
}

// ownerReads is the newest format the replica of an owner record reads.
func ownerReads(val []byte) int {
	var r ownerRecord
	if decodeRecord("owner", val, &r) != nil || r.Reads < OldestFormat {
		return OldestFormat
	}
	return r.Reads
}

// followFleet reads the owner records and watches them, keeping
// fleet.write the oldest format any live replica reads.
func (e *Etcd) followFleet(ctx context.Context) {
	backoff := watchBackoffMin
	for ctx.Err() == nil {
		var rev int64
		err := e.do(ctx, "read owners' formats", func(ctx context.Context) error {
			resp, err := e.kv.Get(ctx, ownersDir, clientv3.WithPrefix())
			if err != nil {
				return err
			}
			reads := map[string]int{}
			for _, kv := range resp.Kvs {
				reads[string(kv.Key)] = ownerReads(kv.Value)
			}
			e.fleet.mu.Lock()
			e.fleet.reads = reads
			e.fleet.mu.Unlock()
			rev = resp.Header.Revision
			return nil
		})
		if err == nil {
			e.settleFormat()
			wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
			for wr := range e.watcher.Watch(wctx, ownersDir, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
				if wr.Err() != nil {
					break
				}
				backoff = watchBackoffMin
				e.fleet.mu.Lock()
				for _, ev := range wr.Events {
					if ev.Type == clientv3.EventTypeDelete {
						delete(e.fleet.reads, string(ev.Kv.Key))
					} else {
						e.fleet.reads[string(ev.Kv.Key)] = ownerReads(ev.Kv.Value)
					}
				}
				e.fleet.mu.Unlock()
				e.settleFormat()
			}
			cancel()
		}
		// Replicas may have come or gone while the watch was down: write
		// the oldest format until the owners are read again.
		e.fleet.write.Store(0)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, watchBackoffMax)
	}
}

// settleFormat sets fleet.write from the owners' formats.
func (e *Etcd) settleFormat() {
	e.fleet.mu.Lock()
	defer e.fleet.mu.Unlock()
	f := FormatVersion
	for _, r := range e.fleet.reads {
		f = min(f, r)
	}
	e.fleet.write.Store(int32(f))
}
