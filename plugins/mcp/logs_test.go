package mcp

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

// A unary call whose client set a logging level relays the upstream's
// log messages for it at that level and above, in order, before the
// answer, over Streamable HTTP and over stdio; without a level the
// upstream is not asked for them.
func TestInvokeRelaysLogs(t *testing.T) {
	t.Parallel()
	up := newHTTPUpstream(t, false)
	for name, base := range transports(t, up) {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			info, err := h.Describe(ctxT(t))
			if err != nil || !info.Capabilities.Log {
				t.Fatalf("describe: %+v %v", info, err)
			}
			cj, _ := json.Marshal(withTool(base, "logs"))
			req := &sdk.Request{Operation: sdk.Operation{Name: "logs", Config: cj},
				Arguments: json.RawMessage(`{"levels": ["debug", "info", "warning", "error"], "text": "hello"}`)}
			var got []string
			res, err := h.Client.InvokeRelayed(ctxT(t), req, info.Capabilities, client.Relay{LogLevel: "info",
				Log: func(m sdk.LogMessage) { got = append(got, m.Level+" "+m.Logger+" "+string(m.Data)) }})
			want := `info upstream {"n":1,"text":"hello"}|warning upstream {"n":2,"text":"hello"}|error upstream {"n":3,"text":"hello"}`
			if err != nil || res.Text != "4 logs" || strings.Join(got, "|") != want {
				t.Fatalf("result %+v %v, logs %q", res, err, got)
			}
			// The session's level went down to info; a call asking for
			// errors only gets those.
			got = nil
			if _, err := h.Client.InvokeRelayed(ctxT(t), req, info.Capabilities, client.Relay{LogLevel: "error",
				Log: func(m sdk.LogMessage) { got = append(got, m.Level) }}); err != nil || strings.Join(got, " ") != "error" {
				t.Fatalf("at error: %v %q", err, got)
			}
			// Progress and logs together.
			var progress int
			got = nil
			if _, err := h.Client.InvokeRelayed(ctxT(t), req, info.Capabilities, client.Relay{LogLevel: "debug",
				Progress: func(sdk.Progress) { progress++ },
				Log:      func(m sdk.LogMessage) { got = append(got, m.Level) }}); err != nil || len(got) != 4 {
				t.Fatalf("with progress: %v %q", err, got)
			}
			if res, err := h.Client.Invoke(ctxT(t), req); err != nil || res.Text != "4 logs" {
				t.Fatalf("without logs: %+v %v", res, err)
			}
			// The messages of a call that asked for none take nothing
			// from the next one's.
			got = nil
			if _, err := h.Client.InvokeRelayed(ctxT(t), req, info.Capabilities, client.Relay{LogLevel: "warning",
				Log: func(m sdk.LogMessage) { got = append(got, m.Level) }}); err != nil || strings.Join(got, " ") != "warning error" {
				t.Fatalf("after a call without logs: %v %q", err, got)
			}
		})
	}
}

// Concurrent calls over one upstream session each get their own log
// messages and no other call's: all of them over Streamable HTTP (each
// call's messages come on its own stream), and over stdio those that came
// while the call was the only one in flight.
func TestLogsOfConcurrentCalls(t *testing.T) {
	t.Parallel()
	eachTransport(t, newHTTPUpstream(t, false), func(t *testing.T, h *adaptertest.Harness, info *client.Info, base map[string]any) {
		name := t.Name()[strings.LastIndex(t.Name(), "/")+1:]
		cj, _ := json.Marshal(withTool(base, "logs"))
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		var total atomic.Int64
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				text := fmt.Sprintf("call-%d", i)
				req := &sdk.Request{Operation: sdk.Operation{Name: "logs", Config: cj},
					Arguments: json.RawMessage(`{"levels": ["info", "info", "info", "info", "info"], "text": "` + text + `"}`)}
				for range 5 {
					n := 0
					_, err := h.Client.InvokeRelayed(ctxT(t), req, info.Capabilities, client.Relay{LogLevel: "info",
						Log: func(m sdk.LogMessage) {
							if !strings.Contains(string(m.Data), `"`+text+`"`) {
								errs <- fmt.Errorf("%s got %s", text, m.Data)
							}
							n++
						}})
					if err != nil || n > 5 || name == "http" && n != 5 {
						errs <- fmt.Errorf("%s: %v, %d logs", text, err, n)
					}
					total.Add(int64(n))
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		t.Logf("%d of %d log messages relayed", total.Load(), 8*5*5)
	})
}

// The message reader tags the log messages of an SSE stream, counts them,
// and passes everything else through as it came, however reads split it.
func TestMsgReader(t *testing.T) {
	in := "event: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"x\"}}\n\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[]}}\r\n\r\n" +
		"data: {\"method\":\"notifications/message\",\ndata: \"params\":{}}\n\n"
	var routes logRoutes
	out, err := io.ReadAll(newMsgReader(io.NopCloser(iotest.OneByteReader(strings.NewReader(in))), framedByEvent, "t1", &routes))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(out), "\n")
	var msg struct{ Params gomcp.LoggingMessageParams }
	if len(lines) != 10 || json.Unmarshal([]byte(strings.TrimPrefix(lines[2], "data: ")), &msg) != nil ||
		msg.Params.Meta[metaCallTag] != "t1" || msg.Params.Data != "x" || strings.Join(lines[3:], "") != strings.Join(strings.SplitAfter(in, "\n")[3:], "") {
		t.Fatalf("out %q", out)
	}
	tag, sink, done := routes.open()
	defer done()
	if _, err := io.ReadAll(newMsgReader(io.NopCloser(strings.NewReader(in)), framedByEvent, tag, &routes)); err != nil || sink.read.Load() != 1 {
		t.Fatalf("%d log messages counted: %v", sink.read.Load(), err)
	}
}

// A message read outside a call's stream is tagged for the only call in
// flight, and for none when two are; a message tagged for no live call, or
// untagged, goes nowhere.
func TestLogRoutes(t *testing.T) {
	var r logRoutes
	tag, s, done := r.open()
	r.inflight.Add(1)
	msg := "data: {\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":1}}\n\n"
	read := func() {
		if _, err := io.ReadAll(newMsgReader(io.NopCloser(strings.NewReader(msg)), framedByEvent, "", &r)); err != nil {
			t.Fatal(err)
		}
	}
	if r.soleTag() != tag {
		t.Fatal("no sole call")
	}
	read()
	r.deliver(&gomcp.LoggingMessageParams{Level: "info"})
	r.deliver(&gomcp.LoggingMessageParams{Level: "info", Meta: gomcp.Meta{metaCallTag: "other"}})
	r.deliver(&gomcp.LoggingMessageParams{Level: "info", Meta: gomcp.Meta{metaCallTag: tag}})
	r.inflight.Add(1)
	if r.soleTag() != "" {
		t.Fatal("a sole call of two")
	}
	read()
	if len(s.ch) != 1 || s.handled.Load() != 1 || s.read.Load() != 1 {
		t.Fatalf("%d delivered, %d handled, %d read", len(s.ch), s.handled.Load(), s.read.Load())
	}
	done()
	for range logBuffer + 5 {
		r.deliver(&gomcp.LoggingMessageParams{Level: "info", Meta: gomcp.Meta{metaCallTag: tag}})
	}
	if len(s.ch) != 1 {
		t.Fatalf("after the call: %d", len(s.ch))
	}
}
