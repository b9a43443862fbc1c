package rest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

// sseWrite writes one event and flushes it.
func sseWrite(w http.ResponseWriter, format string, args ...any) {
	fmt.Fprintf(w, format, args...)
	w.(http.Flusher).Flush()
}

func sseHeader(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
}

// summarize renders stream events compactly: item data (#cursor), gap, end
// or error kind.
func summarize(events []client.Event, ue *sdk.UpstreamError) []string {
	var out []string
	for _, ev := range events {
		out = append(out, ev.String())
	}
	if ue != nil {
		out = append(out, "error "+ue.Kind.String()+": "+ue.Message)
	}
	return out
}

func TestStreamSSE(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") != "text/event-stream" {
			http.Error(w, "want an event stream", http.StatusNotAcceptable)
			return
		}
		sseHeader(w)
		sseWrite(w, ": keep-alive comment\n\n")
		sseWrite(w, "id: 1\ndata: {\"n\":1}\n\n")
		sseWrite(w, "id: 2\r\ndata: plain text\r\n\r\n")                  // CRLF, not JSON: a string
		sseWrite(w, "event: metric\ndata: {\"n\":\ndata: 3}\n\n")         // multi-line data, keeps id 2
		sseWrite(w, "data: [1,2]\rid: 4\r\r")                             // CR line ends
		sseWrite(w, "event: ping\n\n")                                    // no data: not an item
		sseWrite(w, "data: %s\n\n", `{"q":"`+r.URL.Query().Get("q")+`"}`) // arguments reach the query
		sseWrite(w, "data: [DONE]\n\n")
		sseWrite(w, "data: {\"after\":\"done\"}\n\n")
	})
	h := newHarness(t)
	events, ue, err := h.Stream(ctxT(t), adaptertest.Call{
		Config: map[string]any{"method": "GET", "url": srv.URL + "/events", "query": []string{"q"}},
		Args:   map[string]any{"q": "x"},
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(summarize(events, ue), " | ")
	want := `{"n":1}#1 | "plain text"#2 | {"n":` + "\n" + `3}#2 | [1,2]#4 | {"q":"x"}#4 | end`
	if got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
}

func TestStreamEventFilterAndEndData(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeader(w)
		sseWrite(w, "event: log\ndata: 1\n\n")
		sseWrite(w, "data: 2\n\n")
		sseWrite(w, "event: metric\ndata: 3\n\n")
		sseWrite(w, "event: log\ndata: STOP\n\n")
		sseWrite(w, "event: log\ndata: 4\n\n")
	})
	h := newHarness(t)
	events, ue, err := h.Stream(ctxT(t), adaptertest.Call{Config: map[string]any{
		"method": "GET", "url": srv.URL, "stream": map[string]any{"events": []string{"log", "message"}, "end_data": "STOP"},
	}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(summarize(events, ue), " | "); got != "1 | 2 | end" {
		t.Fatalf("events: %s", got)
	}
}

// A dropped stream is reopened with Last-Event-ID and resumes where it
// stopped: nothing lost, nothing repeated.
func TestStreamReconnectsWithLastEventID(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var lastIDs []string
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		lastIDs = append(lastIDs, r.Header.Get("Last-Event-ID"))
		conn := len(lastIDs)
		mu.Unlock()
		from := 1
		if id := r.Header.Get("Last-Event-ID"); id != "" {
			fmt.Sscan(id, &from)
			from++
		}
		sseHeader(w)
		if conn == 3 {
			return // the last reopening finds nothing more: the stream is over
		}
		for i := from; i < from+3; i++ {
			sseWrite(w, "id: %d\ndata: %d\n\n", i, i)
		}
		// A torn event: the connection drops in the middle of it.
		sseWrite(w, "id: 99\ndata: torn")
	})
	h := newHarness(t)
	events, ue, err := h.Stream(ctxT(t), adaptertest.Call{Config: map[string]any{"method": "GET", "url": srv.URL}, Cursor: ""}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(summarize(events, ue), " | "); got != "1#1 | 2#2 | 3#3 | 4#4 | 5#5 | 6#6 | end" {
		t.Fatalf("events: %s", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(lastIDs, ",") != ",3,6" {
		t.Fatalf("Last-Event-ID per connection = %q", lastIDs)
	}
}

// The window's cursor resumes a stream: Last-Event-ID and cursor_param.
func TestStreamResumesFromCursor(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeader(w)
		sseWrite(w, "data: %q\n\n", r.Header.Get("Last-Event-ID")+" "+r.URL.RawQuery)
	})
	h := newHarness(t)
	events, ue, err := h.Stream(ctxT(t), adaptertest.Call{
		Config: map[string]any{"method": "GET", "url": srv.URL, "cursor_param": "after", "stream": map[string]any{"reconnect": false}},
		Cursor: "ev 41",
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(summarize(events, ue), " | "); got != `"ev 41 after=ev+41"#ev 41 | end` {
		t.Fatalf("events: %s", got)
	}
}

// An event over max_event_bytes is skipped with a gap, whatever its line
// ends, and the stream goes on after it.
func TestStreamSkipsOversizeEvents(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 3000)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeader(w)
		sseWrite(w, "id: 1\ndata: 1\n\n")
		sseWrite(w, "data: %s\n\n", big)
		sseWrite(w, "id: 2\ndata: 2\n\n")
		sseWrite(w, "data: %s\r\ndata: %s\r\n\r\n", big, big)
		sseWrite(w, "data: 3\r\r")
		sseWrite(w, "data: %s\n", big)
		sseWrite(w, "\ndata: 4\n\n") // the blank line ending it comes in another write
	})
	h := newHarness(t)
	events, ue, err := h.Stream(ctxT(t), adaptertest.Call{Config: map[string]any{
		"method": "GET", "url": srv.URL, "stream": map[string]any{"max_event_bytes": 1024, "reconnect": false},
	}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	gap := "gap: an SSE event larger than max_event_bytes (1024) was skipped"
	want := strings.Join([]string{"1#1", gap, "2#2", gap, "3#2", gap, "4#2", "end"}, " | ")
	if got := strings.Join(summarize(events, ue), " | "); got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
}

func TestStreamFailures(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("/missing", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no such stream", http.StatusNotFound) })
	mux.HandleFunc("/html", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html>")
	})
	mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"items":[1,2]}`)
	})
	mux.HandleFunc("/nocontent", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("/stall", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	srv := newServer(t, mux.ServeHTTP)
	h := newHarness(t)
	for _, c := range []struct {
		path    string
		timeout time.Duration
		want    string
	}{
		{"/missing", 0, "error upstream_status: upstream answered 404 Not Found"},
		{"/html", 0, `error bad_response: expected a text/event-stream (or JSON) answer, got "text/html"`},
		{"/json", 0, `{"items":[1,2]} | end`},
		{"/nocontent", 0, "end"},
		{"/stall", 200 * time.Millisecond, "error timeout: timeout: the upstream did not answer within 200ms"},
	} {
		events, ue, err := h.Stream(ctxT(t), adaptertest.Call{Config: map[string]any{"method": "GET", "url": srv.URL + c.path}, Timeout: c.timeout}, 0)
		if err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		if got := strings.Join(summarize(events, ue), " | "); got != c.want {
			t.Errorf("%s: got %s, want %s", c.path, got, c.want)
		}
	}
	// Nothing listening: the first connection fails fast.
	down := newServer(t, echoHandler)
	down.Close()
	events, ue, err := h.Stream(ctxT(t), adaptertest.Call{Config: map[string]any{"method": "GET", "url": down.URL}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(summarize(events, ue), " | "); !strings.Contains(got, "error transport: cannot connect to") {
		t.Fatalf("down: %s", got)
	}
}

// Cancelling the stream (what the host does when a window limit is hit)
// closes the upstream connection promptly.
func TestStreamCancelClosesUpstream(t *testing.T) {
	t.Parallel()
	closed := make(chan struct{})
	var sent atomic.Int64
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeader(w)
		for i := 0; ; i++ {
			select {
			case <-r.Context().Done():
				close(closed)
				return
			default:
			}
			sseWrite(w, "data: %d\n\n", i)
			sent.Add(1)
		}
	})
	h := newHarness(t)
	events, ue, err := h.Stream(ctxT(t), adaptertest.Call{Config: map[string]any{"method": "GET", "url": srv.URL}}, 5)
	if err != nil || ue != nil || len(events) != 5 {
		t.Fatalf("events %d: %v %v", len(events), ue, err)
	}
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatalf("upstream still being read after cancel (%d events sent)", sent.Load())
	}
}

// body_fields set fields of the JSON body over the arguments (how an LLM
// stream asks for "stream": true).
func TestBodyFields(t *testing.T) {
	t.Parallel()
	srv := newServer(t, echoHandler)
	h := newHarness(t)
	e := invokeEcho(t, h, adaptertest.Call{
		Config: map[string]any{"method": "POST", "url": srv.URL + "/v1/chat/completions",
			"body_fields": map[string]any{"model": "tiny", "stream": true}},
		Args: map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}, "stream": false},
	})
	var body map[string]any
	if e.Body == nil || json.Unmarshal([]byte(*e.Body), &body) != nil {
		t.Fatalf("body = %v", e.Body)
	}
	if body["model"] != "tiny" || body["stream"] != true || body["messages"] == nil {
		t.Fatalf("body = %s", *e.Body)
	}
}

func TestStreamConfigErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, c := range []struct {
		cfg  map[string]any
		want string
	}{
		{map[string]any{"stream": map[string]any{"max_event_bytes": 10}}, "stream.max_event_bytes: must be from 1024 to 33554432, got 10"},
		{map[string]any{"stream": map[string]any{"reconect": true}}, `stream.reconect: unknown field (did you mean "reconnect"?)`},
		{map[string]any{"stream": "sse"}, "stream: must be an object"},
		{map[string]any{"cursor_param": ""}, "cursor_param: must be a non-empty query parameter name"},
		{map[string]any{"query": []string{"since"}, "cursor_param": "since"}, `cursor_param: query parameter "since" is already filled`},
		{map[string]any{"body_fields": map[string]any{"stream": true}}, `body_fields: this operation sends no body (method GET, body "auto")`},
		{map[string]any{"stream": map[string]any{"max_reconnects": -1}}, "stream.max_reconnects: must be from 0 to 100, got -1"},
	} {
		cfg := map[string]any{"method": "GET", "url": "http://127.0.0.1:1/x"}
		for k, v := range c.cfg {
			cfg[k] = v
		}
		diags, err := h.Validate(ctxT(t), adaptertest.Call{Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		var msgs []string
		for _, d := range diags {
			msgs = append(msgs, d.Field+": "+d.Message)
		}
		if !strings.Contains(strings.Join(msgs, "\n"), c.want) {
			t.Errorf("%v: want %q in %q", c.cfg, c.want, msgs)
		}
	}
}

// Keep the harness's context helper used.
var _ = context.Background
