package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// resumer is an adapter whose calls follow work it names upstream: a
// fresh call reports its resume state ({"work": ...}) and its progress,
// then answers (or holds until cancelled); a resumed call answers what it
// resumed from. With old set it is an adapter that predates resuming: its
// Description has Progress and no Resume.
type resumer struct{ old bool }

func (a resumer) Describe(context.Context) (*sdk.Description, error) {
	name := "resumer"
	if a.old {
		name = "resumer_old"
	}
	return &sdk.Description{Name: name, Modes: []sdk.Mode{sdk.ModeUnary}, Progress: true, Resume: !a.old}, nil
}

func (a resumer) Invoke(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	if len(req.Resume) > 0 {
		return &sdk.Result{Structured: json.RawMessage(fmt.Sprintf(`{"resumed":%s,"args":%q}`, req.Resume, req.Arguments))}, nil
	}
	var args struct {
		Work string `json:"work"`
		Hold bool   `json:"hold"`
	}
	_ = json.Unmarshal(req.Arguments, &args)
	if err := sdk.ReportResume(ctx, json.RawMessage(`{"work":"`+args.Work+`"}`)); err != nil {
		return nil, err
	}
	if err := sdk.ReportResume(ctx, json.RawMessage(`{not json`)); err == nil && sdk.WantsResume(ctx) {
		return nil, fmt.Errorf("ReportResume took a state that is not JSON")
	}
	_ = sdk.ReportProgress(ctx, sdk.Progress{Progress: 1, Message: "working on " + args.Work})
	if args.Hold {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &sdk.Result{Structured: json.RawMessage(fmt.Sprintf(`{"done":%q,"wanted_resume":%t}`, args.Work, sdk.WantsResume(ctx)))}, nil
}

const resumeOps = `
adapters:
  resumer: {command: %[1]s, env: {CRANK_HOST_TEST_ADAPTER: resumer}}
  resumer_old: {command: %[1]s, env: {CRANK_HOST_TEST_ADAPTER: resumer_old}}
operations:
  - name: watch
    description: Work that lives upstream, followed by one call.
    adapter: resumer
    mode: async_job
    timeout: 1m
    input_schema: {type: object, properties: {work: {type: string}, hold: {type: boolean}}}
    config: {}
  - name: watch_old
    description: The same, through an adapter that predates resuming.
    adapter: resumer_old
    mode: async_job
    input_schema: {type: object, properties: {work: {type: string}, hold: {type: boolean}}}
    config: {}
  - name: watch_exchanged
    description: The same, on the caller's behalf.
    adapter: resumer
    mode: async_job
    upstream_auth: {grant: token_exchange, token_endpoint: "https://login.example.com/token", client_id: crank, audience: "https://api.example.com"}
    input_schema: {type: object, properties: {work: {type: string}}}
    config: {token: "{crank.upstream_token}"}
`

// A job of one adapter call whose adapter resumes calls records the
// resume state the adapter reports (follow_json, shown to no client); a
// replica adopting the job calls the operation again with it, and the job
// ends with what the resumed call answered, under its ID. A job whose
// adapter predates resuming, that reported no state, or whose
// credentials are the caller's own is refused, saying why.
func TestAdopterResumesAdapterCall(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	_, st := storetest.Embedded(t)
	cat, err := opsfile.Parse("ops.yaml", []byte(fmt.Sprintf(resumeOps, exe)), opsfile.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	sups := map[string]*host.Supervisor{}
	h, err := host.New(context.Background(), host.Options{File: cat, Store: st, Logger: zap.NewNop(),
		Adapter: func(name string) (*host.Supervisor, error) {
			mu.Lock()
			defer mu.Unlock()
			if sups[name] == nil {
				spec, err := host.AdapterSpecOf(cat, name, nil)
				if err != nil {
					return nil, err
				}
				sup := host.NewSupervisor(spec, host.SupervisorOptions{HealthInterval: -1})
				t.Cleanup(func() { sup.Close() })
				sups[name] = sup
			}
			return sups[name], nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	adopters := &host.Adopters{}
	withdraw := adopters.Offer(func() *host.Host { return h })
	defer withdraw()
	adopt := adopters.Adopt
	ctx := context.Background()
	scope := store.Scope{WorkspaceID: "ws", AgentID: "a1"}

	// The running call's resume state is recorded as soon as reported,
	// and no client sees it.
	id := famOK(t, h, "a1", "watch_start", `{"work":"W-1","hold":true}`)["job_id"].(string)
	waitFor(t, func() bool {
		j, err := st.GetJob(ctx, scope, id)
		return err == nil && string(j.Follow) == `{"work":"W-1"}`
	})
	waitFor(t, func() bool {
		p, _ := famOK(t, h, "a1", "watch_status", `{"job_id":"`+id+`"}`)["progress"].(map[string]any)
		return p["message"] == "working on W-1"
	})
	if m, res := famCall(t, h, "a1", "watch_status", `{"job_id":"`+id+`"}`); strings.Contains(res.Text, `"work"`) {
		t.Errorf("the status shows the resume state: %v", m)
	}
	famOK(t, h, "a1", "watch_cancel", `{"job_id":"`+id+`"}`)
	// An adapter that predates resuming is never asked for a state.
	old := famOK(t, h, "a1", "watch_old_start", `{"work":"W-2"}`)["job_id"].(string)
	waitFor(t, func() bool {
		return famOK(t, h, "a1", "watch_old_status", `{"job_id":"`+old+`"}`)["status"] == "succeeded"
	})
	if j, err := st.GetJob(ctx, scope, old); err != nil || len(j.Follow) != 0 {
		t.Errorf("old adapter's job: follow_json %s, %v", j.Follow, err)
	}

	orphan := func(op, follow string) store.Orphan {
		j, err := st.CreateJob(ctx, store.NewJob{Scope: scope, OperationID: op, MaxRuntime: time.Minute, Owned: true})
		if err != nil {
			t.Fatal(err)
		}
		if follow != "" {
			if j, err = st.UpdateJob(ctx, j.ID, store.JobUpdate{Follow: json.RawMessage(follow)}); err != nil {
				t.Fatal(err)
			}
		}
		return store.Orphan{DeadOwner: "own_dead", Job: j}
	}
	for _, tc := range []struct {
		name string
		o    store.Orphan
		want string
	}{
		{"old adapter", orphan("watch_old", `{"work":"W-9"}`), `adapter "resumer_old" does not resume calls (it lists no "resume" capability`},
		{"no state", orphan("watch", ""), `adapter "resumer" on the replica that died, which reported no resume state for it`},
		{"token exchange", orphan("watch_exchanged", `{"work":"W-9"}`), "exchanged from the caller's own access token (upstream_auth token_exchange)"},
	} {
		if err := adopt(ctx, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}

	o := orphan("watch", `{"work":"W-9"}`)
	if err := adopt(ctx, o); err != nil {
		t.Fatalf("adopt: %v", err)
	}
	waitFor(t, func() bool {
		return famOK(t, h, "a1", "watch_status", `{"job_id":"`+o.Job.ID+`"}`)["status"] == "succeeded"
	})
	r := famOK(t, h, "a1", "watch_result", `{"job_id":"`+o.Job.ID+`"}`)
	if res, _ := r["result"].(map[string]any); res == nil || fmt.Sprint(res["resumed"]) != "map[work:W-9]" {
		t.Errorf("adopted job's result: %v", r)
	}
}
