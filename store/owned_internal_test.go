package store

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Job and stream session records as the release before owned records
// wrote them — every field set, and the fewest — decode and encode to the
// same JSON object again (the same keys and values; only their order may
// differ): replicas of either release read what the other writes.
func TestOwnedRecordsKeepTheirJSON(t *testing.T) {
	t.Parallel()
	encode := func(v any, err error) ([]byte, error) {
		if err != nil {
			return nil, err
		}
		return json.Marshal(v)
	}
	for _, rec := range []struct{ id, val string }{
		{"job_A", `{"id":"job_A","workspace_id":"ws","agent_id":"a","agent_scoped":true,"operation_id":"op","status":"succeeded","progress_json":{"p":1},"result_json":{"r":2},"result_bytes":7,"error_json":{"e":3},"expires_at":"2026-01-02T03:04:05.000000006Z","created_at":"2026-01-02T03:04:05.000000006Z","updated_at":"2026-01-02T03:04:05.000000006Z","finished_at":"2026-01-02T03:04:05.000000006Z","max_runtime_ms":5,"retention_ms":6,"owner":"own_X","cancel_reason":"why","cancel_requested_at":"2026-01-02T03:04:05.000000006Z","retain_limit":9}`},
		{"job_B", `{"id":"job_B","workspace_id":"","operation_id":"","status":"queued","expires_at":"0001-01-01T00:00:00Z","created_at":"0001-01-01T00:00:00Z","updated_at":"0001-01-01T00:00:00Z","max_runtime_ms":0,"retention_ms":0}`},
		{"ss_A", `{"id":"ss_A","workspace_id":"ws","agent_id":"a","agent_scoped":true,"operation_id":"op","protocol":"rest","mode":"session","status":"stopping","cursor":"7","state_json":{"s":1},"error_json":{"e":2},"expires_at":"2026-01-02T03:04:05.000000006Z","last_poll_at":"2026-01-02T03:04:05.000000006Z","created_at":"2026-01-02T03:04:05.000000006Z","closed_at":"2026-01-02T03:04:05.000000006Z","idle_timeout_ms":1,"max_lifetime_ms":2,"retention_ms":3,"owner":"own_X","stop_reason":"why","stop_requested_at":"2026-01-02T03:04:05.000000006Z","max_items":4,"max_bytes":5,"last_seq":9,"acked_seq":8,"buffered_items":1,"buffered_bytes":6,"taken":9}`},
		{"ss_B", `{"id":"ss_B","workspace_id":"","operation_id":"","status":"active","expires_at":"0001-01-01T00:00:00Z","created_at":"0001-01-01T00:00:00Z","idle_timeout_ms":0,"max_lifetime_ms":0,"retention_ms":0,"max_items":0,"max_bytes":0}`},
	} {
		var enc []byte
		var err error
		if strings.HasPrefix(rec.id, JobIDPrefix) {
			enc, err = encode(jobKind.decode(&mvccpb.KeyValue{Key: []byte(jobKind.key(rec.id)), Value: []byte(rec.val)}))
		} else {
			enc, err = encode(streamSessionKind.decode(&mvccpb.KeyValue{Key: []byte(streamSessionKind.key(rec.id)), Value: []byte(rec.val)}))
		}
		if err != nil {
			t.Fatalf("%s: %v", rec.id, err)
		}
		var want, got map[string]any
		if err := json.Unmarshal([]byte(rec.val), &want); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(enc, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(want, got) {
			t.Errorf("%s encodes as\n%s\nwant the object\n%s", rec.id, enc, rec.val)
		}
	}
}
