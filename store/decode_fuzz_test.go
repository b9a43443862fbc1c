package store

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Record kinds FuzzRecordDecoding decodes, by the fuzzer's first byte.
const (
	fuzzJob = iota
	fuzzStreamSession
	fuzzMCPSession
	fuzzEventStream
	fuzzSharedKey
	fuzzKinds
)

// fuzzSeeds are well-formed records of every kind and corrupt or hostile
// variants of them, as values etcd could hand back.
func fuzzSeeds() []struct {
	kind byte
	id   string
	val  []byte
} {
	now := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	job, _ := json.Marshal(jobRecord{owned: owned[JobStatus]{ID: "job_AAAAAAAAAAAAAAAAAAAAAAAAAA", WorkspaceID: "ws", AgentID: "a", AgentScoped: true,
		OperationID: "report", Status: JobSucceeded, ExpiresAt: now.Add(time.Hour), CreatedAt: now, RetentionMS: 3600000, Owner: "own_X"},
		Progress: json.RawMessage(`{"pct":100}`), ResultBytes: 12, UpdatedAt: now, FinishedAt: now, MaxRuntimeMS: 60000, CancelReason: "late"})
	oldJob, _ := json.Marshal(jobRecord{owned: owned[JobStatus]{ID: "job_BBBBBBBBBBBBBBBBBBBBBBBBBB", WorkspaceID: "ws", OperationID: "x", Status: JobRunning,
		CreatedAt: now, ExpiresAt: now.Add(time.Minute)}, Result: json.RawMessage(`{"docs":3}`), MaxRuntimeMS: 1})
	ss, _ := json.Marshal(streamSessionRecord{owned: owned[StreamSessionStatus]{ID: "ss_AAAAAAAAAAAAAAAAAAAAAAAAAA", WorkspaceID: "ws", OperationID: "follow",
		Status: StreamSessionActive, ExpiresAt: now.Add(time.Minute), CreatedAt: now, RetentionMS: 60000, Owner: "own_X"},
		Protocol: "rest", Mode: "session", Cursor: "7", State: json.RawMessage(`{"gaps":1}`), LastPollAt: now, IdleMS: 60000, LifetimeMS: 600000,
		MaxItems: 1000, MaxBytes: 1 << 20, LastSeq: 9, AckedSeq: 7, BufferedItems: 2, BufferedBytes: 40})
	mcp, _ := json.Marshal(mcpSessionRecord{ID: "s-1", ProtocolVersion: "2025-11-25", ClientName: "c",
		ClientCapabilities: json.RawMessage(`{"roots":{}}`), InitializeParams: json.RawMessage(`{"protocolVersion":"2025-11-25"}`),
		Initialized: true, WorkspaceID: "ws", AgentID: "a", CreatedAt: now, TTLMillis: 1800000})
	ev, _ := json.Marshal(eventStreamRecord{First: 3, Next: 10, Bytes: 420})
	key, _ := json.Marshal(sharedKeyRecord{Name: "cursors", Key: bytes.Repeat([]byte{7}, SharedKeyBytes), CreatedAt: now})
	return []struct {
		kind byte
		id   string
		val  []byte
	}{
		{fuzzJob, "job_AAAAAAAAAAAAAAAAAAAAAAAAAA", job},
		{fuzzJob, "job_BBBBBBBBBBBBBBBBBBBBBBBBBB", oldJob},
		{fuzzJob, "job_CCCCCCCCCCCCCCCCCCCCCCCCCC", job}, // another job's record
		{fuzzJob, "job_AAAAAAAAAAAAAAAAAAAAAAAAAA", bytes.Replace(job, []byte(`"succeeded"`), []byte(`"exploded"`), 1)},
		{fuzzJob, "job_AAAAAAAAAAAAAAAAAAAAAAAAAA", bytes.Replace(job, []byte(`"max_runtime_ms":60000`), []byte(`"max_runtime_ms":-1`), 1)},
		{fuzzJob, "job_AAAAAAAAAAAAAAAAAAAAAAAAAA", []byte(`{"id":"job_AAAAAAAAAAAAAAAAAAAAAAAAAA","status":"running","created_at":"x"}`)},
		{fuzzJob, "job_AAAAAAAAAAAAAAAAAAAAAAAAAA", job[:len(job)/2]},
		{fuzzStreamSession, "ss_AAAAAAAAAAAAAAAAAAAAAAAAAA", ss},
		{fuzzStreamSession, "ss_AAAAAAAAAAAAAAAAAAAAAAAAAA", bytes.Replace(ss, []byte(`"acked_seq":7`), []byte(`"acked_seq":99`), 1)},
		{fuzzStreamSession, "ss_AAAAAAAAAAAAAAAAAAAAAAAAAA", bytes.Replace(ss, []byte(`"max_items":1000`), []byte(`"max_items":-5`), 1)},
		{fuzzStreamSession, "ss_AAAAAAAAAAAAAAAAAAAAAAAAAA", bytes.Replace(ss, []byte(`"last_seq":9`), []byte(`"last_seq":18446744073709551615`), 1)},
		{fuzzStreamSession, "ss_AAAAAAAAAAAAAAAAAAAAAAAAAA", []byte(`{"id":"ss_AAAAAAAAAAAAAAAAAAAAAAAAAA","status":"active","state_json":`)},
		{fuzzMCPSession, "s-1", mcp},
		{fuzzMCPSession, "s-2", mcp},
		{fuzzMCPSession, "s-1", bytes.Replace(mcp, []byte(`"ttl_ms":1800000`), []byte(`"ttl_ms":0`), 1)},
		{fuzzMCPSession, "s-1", []byte(`null`)},
		{fuzzEventStream, "", ev},
		{fuzzEventStream, "", []byte(`{"first":0,"next":4611686018427387904,"bytes":1}`)},
		{fuzzEventStream, "", []byte(`{"first":9,"next":3}`)},
		{fuzzEventStream, "", []byte(`{"first":-1}`)},
		{fuzzEventStream, "", []byte(`[]`)},
		{fuzzSharedKey, "cursors", key},
		{fuzzSharedKey, "other", key},
		{fuzzSharedKey, "cursors", bytes.Replace(key, []byte(`"key":"`), []byte(`"key":"AAAA`), 1)},
		{fuzzSharedKey, "cursors", []byte(`{"name":"cursors","key":null}`)},
	}
}

// FuzzRecordDecoding decodes arbitrary values as the records the store
// reads back from etcd (jobs, stream sessions, MCP sessions, event stream
// positions, shared keys). A value is either refused with an error naming the record,
// or decodes into a record that keeps the store's invariants (its own ID,
// a known status, no negative bounds, a possible event span), that the
// store's derived views handle, and whose encoding is stable: encoding it
// and decoding that gives the same encoding.
func FuzzRecordDecoding(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s.kind, s.id, s.val)
	}
	f.Fuzz(func(t *testing.T, kind byte, id string, val []byte) {
		switch kind % fuzzKinds {
		case fuzzJob:
			kv := &mvccpb.KeyValue{Key: []byte(jobKind.key(id)), Value: val}
			r, err := jobKind.decode(kv)
			if err != nil {
				if !strings.Contains(err.Error(), "decode job") {
					t.Fatalf("error does not say what failed: %v", err)
				}
				return
			}
			if r.ID != id || !jobKind.known(r.Status) || r.MaxRuntimeMS < 0 || r.RetentionMS < 0 || r.ResultBytes < 0 {
				t.Fatalf("decoded a record that breaks the invariants: %+v", r)
			}
			_ = r.public(1)
			_, _, _ = r.expiry(), r.hardDeadline(), r.visibleTo(Scope{WorkspaceID: r.WorkspaceID})
			_, _ = jobKind.live(kv, &Scope{WorkspaceID: "ws", AgentID: "a"}, time.Now())
			stableEncoding(t, r, func(b []byte) (any, error) { return jobKind.decode(&mvccpb.KeyValue{Key: kv.Key, Value: b}) })
		case fuzzStreamSession:
			kv := &mvccpb.KeyValue{Key: []byte(streamSessionKind.key(id)), Value: val}
			r, err := streamSessionKind.decode(kv)
			if err != nil {
				if !strings.Contains(err.Error(), "decode stream session") {
					t.Fatalf("error does not say what failed: %v", err)
				}
				return
			}
			if r.ID != id || !streamSessionKind.known(r.Status) || r.AckedSeq > r.LastSeq || r.MaxItems < 0 || r.MaxBytes < 0 ||
				r.BufferedItems < 0 || r.BufferedBytes < 0 || r.IdleMS < 0 || r.LifetimeMS < 0 || r.RetentionMS < 0 {
				t.Fatalf("decoded a record that breaks the invariants: %+v", r)
			}
			_ = r.public(1)
			_, _, _ = r.expiry(), r.hardDeadline(), r.visibleTo(Scope{WorkspaceID: r.WorkspaceID})
			_, _ = streamSessionKind.live(kv, &Scope{WorkspaceID: "ws"}, time.Now())
			stableEncoding(t, r, func(b []byte) (any, error) {
				return streamSessionKind.decode(&mvccpb.KeyValue{Key: kv.Key, Value: b})
			})
		case fuzzMCPSession:
			r, err := decodeMCPSession(id, val)
			if err != nil {
				if !strings.Contains(err.Error(), "decode MCP session") {
					t.Fatalf("error does not say what failed: %v", err)
				}
				return
			}
			if r.ID != id || r.TTLMillis <= 0 {
				t.Fatalf("decoded a record that breaks the invariants: %+v", r)
			}
			stableEncoding(t, r, func(b []byte) (any, error) { return decodeMCPSession(id, b) })
		case fuzzEventStream:
			rec, err := decodeEventStream(val)
			if err != nil {
				if !strings.Contains(err.Error(), "decode stream record") {
					t.Fatalf("error does not say what failed: %v", err)
				}
				return
			}
			if rec.First > rec.Next || rec.Next-rec.First > MaxEventLogEvents {
				t.Fatalf("decoded an impossible span: %+v", rec)
			}
			enc, _ := json.Marshal(rec)
			if rec2, err := decodeEventStream(enc); err != nil || rec2.First != rec.First || rec2.Next != rec.Next || rec2.Bytes != rec.Bytes {
				t.Fatalf("round trip: %+v, %v", rec2, err)
			}
		case fuzzSharedKey:
			k, err := decodeSharedKey(id, val)
			if err != nil {
				if !strings.Contains(err.Error(), "decode shared key") {
					t.Fatalf("error does not say what failed: %v", err)
				}
				return
			}
			if len(k) != SharedKeyBytes || bytes.Equal(k, make([]byte, SharedKeyBytes)) {
				t.Fatalf("decoded a key that is not %d random bytes: %x", SharedKeyBytes, k)
			}
		}
	})
}

// stableEncoding checks that a decoded record encodes, that the encoding
// decodes again, and that encoding that gives the same bytes.
func stableEncoding(t *testing.T, r any, decode func([]byte) (any, error)) {
	t.Helper()
	enc, err := json.Marshal(r)
	if err != nil {
		t.Fatalf("a decoded record does not encode: %v", err)
	}
	r2, err := decode(enc)
	if err != nil {
		t.Fatalf("a re-encoded record does not decode: %v\n%s", err, enc)
	}
	if enc2, _ := json.Marshal(r2); !bytes.Equal(enc, enc2) {
		t.Fatalf("encoding is not stable:\n%s\n%s", enc, enc2)
	}
}
