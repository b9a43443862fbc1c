package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/host/redact"
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// straddleSecret is expanded from a placeholder into a request header; the
// upstream echoes it in an item field right after the padding the client
// chose. Its characters are neither the padding's nor in the truncation
// or redaction marks, and every 4 of them in a row hold a character no
// id, digest or cursor the host writes has (base32, hex, base64url), so
// any 4 of them in a row in what the host lets out are a leak.
const straddleSecret = "SK9!Q7X~W2M*Z4P!LR8~TVN*3KH!B6J" // 31 characters

// straddleCut is the operations' max_field_length: with every padding from
// 0 to len(straddleSecret)+10 the cut falls before, inside (at every
// offset) and after the secret.
const straddleCut = 40

const straddleOps = `
adapters:
  rest: {command: %[1]s, env: {CRANK_HOST_TEST_ADAPTER: rest}}
operations:
  - name: cut_window
    description: One echoed event, its field cut.
    adapter: rest
    mode: window
    input_schema: {type: object, properties: {pad: {type: string}}}
    limits: {window_duration_ms: 10000, max_items: 1}
    safety: {max_field_length: %[2]d}
    config: {method: GET, url: "UPSTREAM/straddle/stream", query: [pad], headers: {X-Token: "{env.STRADDLE}"}}
  - name: cut_window_poll
    description: One echoed page, its item's field cut.
    adapter: rest
    mode: window
    transport_behavior: request_response
    input_schema: {type: object, properties: {pad: {type: string}}}
    limits: {window_duration_ms: 10000, poll_interval_ms: 10}
    aggregation: {items_path: "$.items[*]", done_path: $.done}
    safety: {max_field_length: %[2]d}
    config: {method: GET, url: "UPSTREAM/straddle/poll", query: [pad], headers: {X-Token: "{env.STRADDLE}"}}
  - name: cut_groups
    description: Counts per echoed value, the value cut.
    adapter: rest
    mode: window
    input_schema: {type: object, properties: {pad: {type: string}}}
    limits: {window_duration_ms: 10000, max_items: 1}
    aggregation: {aggregation_mode: summary_only, group_by: $.f}
    safety: {max_field_length: %[2]d}
    config: {method: GET, url: "UPSTREAM/straddle/stream", query: [pad], headers: {X-Token: "{env.STRADDLE}"}}
  - name: cut_text
    description: The echoed text joined, each chunk cut.
    adapter: rest
    mode: window
    input_schema: {type: object, properties: {pad: {type: string}}}
    limits: {window_duration_ms: 10000, max_items: 1}
    aggregation: {aggregation_mode: text, text_path: $.f}
    safety: {max_field_length: %[2]d}
    config: {method: GET, url: "UPSTREAM/straddle/stream", query: [pad], headers: {X-Token: "{env.STRADDLE}"}}
  - name: split_text
    description: The echo in two chunks, joined.
    adapter: rest
    mode: window
    input_schema: {type: object, properties: {pad: {type: string}, at: {type: integer}}}
    limits: {window_duration_ms: 10000, max_items: 2}
    aggregation: {aggregation_mode: text, text_path: $.f}
    config: {method: GET, url: "UPSTREAM/straddle/split", query: [pad, at], headers: {X-Token: "{env.STRADDLE}"}}
  - name: cut_session
    description: A session on the echoing stream.
    adapter: rest
    mode: session
    input_schema: {type: object, properties: {pad: {type: string}}}
    limits: {idle_timeout_ms: 60000, max_session_lifetime_ms: 60000}
    safety: {max_field_length: %[2]d}
    config: {method: GET, url: "UPSTREAM/straddle/stream", query: [pad], headers: {X-Token: "{env.STRADDLE}"}}
  - name: cut_session_poll
    description: A polled session on the echoing page.
    adapter: rest
    mode: session
    transport_behavior: request_response
    input_schema: {type: object, properties: {pad: {type: string}}}
    limits: {idle_timeout_ms: 60000, max_session_lifetime_ms: 60000, poll_interval_ms: 10}
    aggregation: {items_path: "$.items[*]", done_path: $.done}
    safety: {max_field_length: %[2]d}
    config: {method: GET, url: "UPSTREAM/straddle/poll", query: [pad], headers: {X-Token: "{env.STRADDLE}"}}
  - name: cut_job
    description: A window of the echoing stream in the background.
    adapter: rest
    mode: async_job
    transport_behavior: server_stream
    input_schema: {type: object, properties: {pad: {type: string}}}
    limits: {window_duration_ms: 10000, max_items: 1}
    safety: {max_field_length: %[2]d}
    config: {method: GET, url: "UPSTREAM/straddle/stream", query: [pad], headers: {X-Token: "{env.STRADDLE}"}}
  - name: cut_error
    description: One echoed answer, refused; its body is the error's excerpt.
    adapter: rest
    input_schema: {type: object, properties: {pad: {type: string}}}
    config: {method: GET, url: "UPSTREAM/straddle/error", query: [pad], headers: {X-Token: "{env.STRADDLE}"}}
  - name: cut_error_window
    description: A window polling an echoed refusal.
    adapter: rest
    mode: window
    transport_behavior: request_response
    input_schema: {type: object, properties: {pad: {type: string}}}
    limits: {window_duration_ms: 10000, poll_interval_ms: 10}
    config: {method: GET, url: "UPSTREAM/straddle/error", query: [pad], headers: {X-Token: "{env.STRADDLE}"}}
  - name: cut_unary
    description: One echoed answer.
    adapter: rest
    input_schema: {type: object, properties: {pad: {type: string}}}
    config: {method: GET, url: "UPSTREAM/straddle/poll", query: [pad], headers: {X-Token: "{env.STRADDLE}"}}
`

type straddleFixture struct {
	h  *host.Host
	st *store.Etcd
}

func newStraddleFixture(t *testing.T) *straddleFixture {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	echo := func(r *http.Request) string { return r.URL.Query().Get("pad") + r.Header.Get("X-Token") }
	up := newStreamUpstream(t, func(mux *http.ServeMux) {
		mux.HandleFunc("GET /straddle/stream", func(w http.ResponseWriter, r *http.Request) {
			f := startSSE(w)
			item, _ := json.Marshal(map[string]any{"n": 1, "f": echo(r)})
			fmt.Fprintf(w, "id: 1\ndata: %s\n\n", item)
			f.Flush()
			<-r.Context().Done()
		})
		// The echo in two events, split at ?at=.
		mux.HandleFunc("GET /straddle/split", func(w http.ResponseWriter, r *http.Request) {
			f := startSSE(w)
			e := echo(r)
			at := min(len(e), len(r.URL.Query().Get("pad"))+atoi(r.URL.Query().Get("at")))
			for i, part := range []string{e[:at], e[at:]} {
				item, _ := json.Marshal(map[string]any{"f": part})
				fmt.Fprintf(w, "id: %d\ndata: %s\n\n", i+1, item)
			}
			f.Flush()
			<-r.Context().Done()
		})
		mux.HandleFunc("GET /straddle/error", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, echo(r), strings.Repeat("-", 100))
		})
		mux.HandleFunc("GET /straddle/poll", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"items": []any{map[string]any{"f": echo(r)}}, "done": true})
		})
	})
	ops := strings.ReplaceAll(fmt.Sprintf(straddleOps, exe, straddleCut), "UPSTREAM", up.URL)
	cat, err := opsfile.Parse("ops.yaml", []byte(ops), opsfile.LoadOptions{Expand: func(s string) string {
		return strings.ReplaceAll(s, "{env.STRADDLE}", straddleSecret)
	}})
	if err != nil {
		t.Fatal(err)
	}
	_, st := storetest.Embedded(t)
	h, err := host.New(context.Background(), host.Options{File: cat, Store: st, Logger: zap.NewNop(),
		Adapter: oneSupervisor(t, cat, zap.NewNop())})
	if err != nil {
		t.Fatal(err)
	}
	return &straddleFixture{h: h, st: st}
}

// call makes one call as agent a1 of workspace ws, collecting its
// progress messages into what it returns.
func (f *straddleFixture) call(t *testing.T, tool string, args any) (*host.Result, string) {
	t.Helper()
	raw, _ := json.Marshal(args)
	var mu sync.Mutex
	var progress []string
	res, err := f.h.Call(context.Background(), host.CallRequest{Tool: f.h.Tool(tool), Arguments: raw, WorkspaceID: "ws", AgentID: "a1",
		Progress: func(_ context.Context, c host.ProgressChunk) {
			mu.Lock()
			progress = append(progress, c.Message)
			mu.Unlock()
		}})
	if err != nil {
		t.Fatalf("call %s: %v", tool, err)
	}
	mu.Lock()
	defer mu.Unlock()
	return res, strings.Join(progress, "\n")
}

// straddleLeak returns the first run of 4 characters of the secret found
// in text ("" for none): the padding is dots, so no such run is the
// client's own.
func straddleLeak(text string) string {
	for i := 0; i+redact.MinSecretLength <= len(straddleSecret); i++ {
		if run := straddleSecret[i : i+redact.MinSecretLength]; strings.Contains(text, run) {
			return run
		}
	}
	return ""
}

// echoed is what of the echo with pad dots must reach the client: the
// padding, then what max_field_length leaves of the redaction mark.
func echoed(pad int) string {
	s := strings.Repeat(".", pad) + redact.Mark
	return s[:min(len(s), straddleCut)]
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// A secret an upstream echoes after padding the client chose is redacted
// before max_field_length cuts the field, wherever the cut falls in it:
// no part of it reaches a window's result or progress, a session's stored
// items or polls, or a job's result.
func TestRedactionBeforeTruncation(t *testing.T) {
	f := newStraddleFixture(t)
	ctx := context.Background()
	scope := store.Scope{WorkspaceID: "ws", AgentID: "a1"}
	pads := len(straddleSecret) + 10
	check := func(t *testing.T, pad int, channel, text string) {
		t.Helper()
		if run := straddleLeak(text); run != "" {
			t.Errorf("padding %d: %q of the secret reached the %s:\n%s", pad, run, channel, text)
		}
	}
	for _, tool := range []string{"cut_window", "cut_window_poll", "cut_groups", "cut_text", "cut_unary"} {
		t.Run(tool, func(t *testing.T) {
			t.Parallel()
			for pad := 0; pad <= pads; pad++ {
				res, progress := f.call(t, tool, map[string]any{"pad": strings.Repeat(".", pad)})
				if res.IsError {
					t.Fatalf("padding %d: %s", pad, res.Text)
				}
				check(t, pad, "result text", res.Text)
				check(t, pad, "structuredContent", string(res.Structured))
				check(t, pad, "progress", progress)
				if !strings.Contains(res.Text+string(res.Structured), echoed(pad)) {
					t.Fatalf("padding %d: the echo is not in the result:\n%s", pad, res.Text)
				}
			}
		})
	}
	for _, name := range []string{"cut_session", "cut_session_poll"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for pad := 0; pad <= pads; pad++ {
				start, _ := f.call(t, name+"_start", map[string]any{"pad": strings.Repeat(".", pad)})
				var s struct {
					ID string `json:"session_id"`
				}
				if err := json.Unmarshal(start.Structured, &s); err != nil || s.ID == "" {
					t.Fatalf("start: %s", start.Text)
				}
				var poll *host.Result
				waitFor(t, func() bool {
					poll, _ = f.call(t, name+"_poll", map[string]any{"session_id": s.ID})
					return strings.Contains(poll.Text, `"items":[{`)
				})
				check(t, pad, "poll", poll.Text)
				if !strings.Contains(poll.Text, echoed(pad)) {
					t.Fatalf("padding %d: the echo is not in the poll:\n%s", pad, poll.Text)
				}
				stored, err := f.st.PollStreamSession(ctx, scope, s.ID, store.PollRequest{})
				if err != nil || len(stored.Items) == 0 {
					t.Fatalf("stored items: %v %v", stored, err)
				}
				for _, it := range stored.Items {
					check(t, pad, "stored item", string(it.Data))
				}
				f.call(t, name+"_stop", map[string]any{"session_id": s.ID})
			}
		})
	}
	// The text a text window joins is redacted as a whole: a secret the
	// upstream split between two chunks reaches neither the result nor a
	// progress message, which hold back what may start a secret until the
	// rest of it has arrived.
	t.Run("split_text", func(t *testing.T) {
		t.Parallel()
		for at := 0; at <= len(straddleSecret); at++ {
			res, progress := f.call(t, "split_text", map[string]any{"pad": "...", "at": at})
			if res.IsError {
				t.Fatalf("split at %d: %s", at, res.Text)
			}
			check(t, at, "result text", res.Text)
			check(t, at, "structuredContent", string(res.Structured))
			check(t, at, "progress", progress)
			if joined := strings.ReplaceAll(progress, "\n", ""); joined != "..."+redact.Mark {
				t.Errorf("split at %d: the progress messages join to %q", at, joined)
			}
		}
	})
	t.Run("cut_job", func(t *testing.T) {
		t.Parallel()
		for pad := 0; pad <= pads; pad++ {
			start, _ := f.call(t, "cut_job_start", map[string]any{"pad": strings.Repeat(".", pad)})
			var j struct {
				ID string `json:"job_id"`
			}
			if err := json.Unmarshal(start.Structured, &j); err != nil || j.ID == "" {
				t.Fatalf("start: %s", start.Text)
			}
			var res *host.Result
			waitFor(t, func() bool {
				res, _ = f.call(t, "cut_job_result", map[string]any{"job_id": j.ID})
				return strings.Contains(res.Text, `"ready":true`)
			})
			check(t, pad, "job result", res.Text)
			stored, err := f.st.GetJobResult(ctx, scope, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			check(t, pad, "stored job", string(stored.Result)+string(stored.Progress))
		}
	})
}

// An upstream's refusal that echoes a secret after padding the client
// chose is redacted before its excerpt is cut, wherever the cut falls:
// the adapter keeps the excerpt longer by the secret's length, and the
// host redacts it and only then cuts it to sdk.ExcerptBytes.
func TestRedactionBeforeExcerptCut(t *testing.T) {
	f := newStraddleFixture(t)
	for _, tool := range []string{"cut_error", "cut_error_window"} {
		t.Run(tool, func(t *testing.T) {
			t.Parallel()
			for pad := sdk.ExcerptBytes - len(straddleSecret) - 2; pad <= sdk.ExcerptBytes+2; pad++ {
				res, _ := f.call(t, tool, map[string]any{"pad": strings.Repeat(".", pad)})
				if tool == "cut_error" && !res.IsError || !strings.Contains(res.Text, "upstream body: ...") {
					t.Fatalf("padding %d: %s", pad, res.Text)
				}
				if run := straddleLeak(res.Text + string(res.Structured)); run != "" {
					t.Fatalf("padding %d: %q of the secret reached the result:\n%s", pad, run, res.Text[max(0, len(res.Text)-200):])
				}
				if pad < sdk.ExcerptBytes-len(straddleSecret) && !strings.Contains(res.Text, redact.Mark) {
					t.Fatalf("padding %d: the secret within the excerpt is not marked:\n%s", pad, res.Text[len(res.Text)-200:])
				}
			}
		})
	}
}
