package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// logFile writes content to app.log in a new directory and returns the
// directory, which operations resolve their relative path against.
func logFile(t *testing.T, content string) string {
	t.Helper()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "app.log"), content)
	return dir
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendTo(t *testing.T, path, content string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	d, err := adaptertest.New(t, newAdapter()).Describe(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	schema := string(d.ConfigSchema)
	if d.Name != "filetail" || !d.Serves(sdk.ModeUnary) || !d.Serves(sdk.ModeWindow) ||
		d.Capabilities != (client.Capabilities{Validate: true, Expand: true, Stream: true, Streams: true, StreamsInvoke: true}) ||
		!strings.Contains(schema, `"required":["path"]`) || !strings.Contains(schema, `"maximum":100000`) {
		t.Fatalf("describe: %+v, schema %s", d, schema)
	}
}

func TestValidateOperation(t *testing.T) {
	t.Parallel()
	h := adaptertest.New(t, newAdapter())
	dir := logFile(t, "")
	for _, c := range []struct{ config, want string }{
		{`{"path": "app.log"}`, ``},
		{`{"path": "app.log", "max_lines": 5, "max_line_bytes": 80, "poll_interval": "50ms"}`, ``},
		{`{"path": "missing.log"}`, `warning path: no such file yet: calls fail until it exists`},
		{`{"path": "."}`, `error path: is a directory, not a file`},
		{`{}`, `error path: is required: the file to serve`},
		{`{"path": "app.log", "max_line": 5}`, `error max_line: unknown field (did you mean "max_lines"?)`},
		{`{"path": "app.log", "max_lines": "5"}`, `error max_lines: must be an integer, got a string`},
		{`{"path": "app.log", "max_lines": 0, "max_line_bytes": -1}`, `error max_line_bytes: must be from 1 to 1048576, got -1`},
		{`{"path": "app.log", "poll_interval": "1ms"}`, `error poll_interval: must be at least 10ms`},
	} {
		diags, err := h.Validate(ctxT(t), adaptertest.Call{Config: c.config, BaseDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, d := range diags {
			got = append(got, d.Severity.String()+" "+d.Field+": "+d.Message)
		}
		if strings.Join(got, "; ") != c.want {
			t.Errorf("%s: %q, want %q", c.config, got, c.want)
		}
	}
}

func TestExpandOperation(t *testing.T) {
	t.Parallel()
	h := adaptertest.New(t, newAdapter())
	dir := logFile(t, "")
	tools, diags, err := h.Expand(ctxT(t), adaptertest.Call{Config: `{"path": "app.log", "max_lines": 50}`, BaseDir: dir})
	if err != nil || len(diags) != 0 || len(tools) != 1 || tools[0].Name != "" {
		t.Fatalf("expand: %+v %v %v", tools, diags, err)
	}
	if in := string(tools[0].InputSchema); !strings.Contains(in, `"maximum": 50, "default": 10`) {
		t.Errorf("unary input schema: %s", in)
	}
	tools, _, _ = h.Expand(ctxT(t), adaptertest.Call{Config: `{"path": "app.log"}`, BaseDir: dir, Mode: sdk.ModeWindow})
	if in := string(tools[0].InputSchema); !strings.Contains(in, `"default": 0`) {
		t.Errorf("window input schema: %s", in)
	}
}

func TestInvoke(t *testing.T) {
	t.Parallel()
	h := adaptertest.New(t, newAdapter())
	long := strings.Repeat("x", 100)
	dir := logFile(t, "one\ntwo\r\nthree\n"+long+"\nfive\nsix, being writ")
	for _, c := range []struct{ config, args, want string }{
		{`{"path": "app.log"}`, `{}`, `{"cursor":"121","lines":["one","two","three","` + long + `","five"]}`},
		{`{"path": "app.log"}`, `{"lines": 2}`, `{"cursor":"121","lines":["` + long + `","five"]}`},
		{`{"path": "app.log", "max_line_bytes": 8}`, `{"lines": 4}`, `{"cursor":"121","lines":["two","three","xxxxxxxx","five"]}`},
		{`{"path": "app.log"}`, `{"lines": 0}`, `{"cursor":"121","lines":[]}`},
	} {
		res, ue, err := h.Invoke(ctxT(t), adaptertest.Call{Config: c.config, Args: c.args, BaseDir: dir})
		if err != nil || ue != nil || string(res.Structured) != c.want {
			t.Errorf("%s %s: %v %v %v, want %s", c.config, c.args, res, ue, err, c.want)
		}
	}
	res, _, _ := h.Invoke(ctxT(t), adaptertest.Call{Config: `{"path": "app.log"}`, Args: `{"lines": 2}`, BaseDir: dir})
	if res.Text != long+"\nfive" {
		t.Errorf("text %q", res.Text)
	}
}

func TestInvokeFailures(t *testing.T) {
	t.Parallel()
	h := adaptertest.New(t, newAdapter())
	dir := logFile(t, "one\n")
	for _, c := range []struct {
		config, args string
		want         sdk.UpstreamError
	}{
		{`{"path": "app.log", "max_lines": 5}`, `{"lines": 6}`,
			sdk.UpstreamError{Kind: sdk.KindInvalidArgument, Upstream: "file app.log", Message: "lines must be from 0 to 5"}},
		{`{"path": "app.log"}`, `{"lines": "all"}`,
			sdk.UpstreamError{Kind: sdk.KindInvalidArgument, Upstream: "file app.log", Message: "lines must be an integer"}},
		{`{"path": "gone.log"}`, `{}`,
			sdk.UpstreamError{Kind: sdk.KindTransport, Upstream: "file gone.log", Message: "open: no such file or directory", Retryable: true}},
		{`{"path": "."}`, `{}`,
			sdk.UpstreamError{Kind: sdk.KindInvalidArgument, Message: "invalid filetail operation config: path: is a directory, not a file"}},
	} {
		_, ue, err := h.Invoke(ctxT(t), adaptertest.Call{Config: c.config, Args: c.args, BaseDir: dir})
		if err != nil || ue == nil || !reflect.DeepEqual(*ue, c.want) {
			t.Errorf("%s %s: %+v %v, want %+v", c.config, c.args, ue, err, c.want)
		}
	}
}

// follow opens a stream of app.log in dir as a host's window does.
func follow(t *testing.T, h *adaptertest.Harness, dir, args, cursor string) *client.Stream {
	t.Helper()
	st, err := h.Client.Stream(ctxT(t), &sdk.Request{
		Operation: sdk.Operation{Name: "follow", Mode: sdk.ModeWindow, BaseDir: dir,
			Config: json.RawMessage(`{"path": "app.log", "poll_interval": "10ms"}`)},
		Arguments: json.RawMessage(args),
		Cursor:    cursor,
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// expect receives len(want) events and compares them with want.
func expect(t *testing.T, st *client.Stream, want ...string) {
	t.Helper()
	for _, w := range want {
		ev, err := st.Recv()
		if err != nil || ev.String() != w {
			t.Fatalf("event %q (%v), want %q", ev.String(), err, w)
		}
	}
}

func TestStream(t *testing.T) {
	t.Parallel()
	h := adaptertest.New(t, newAdapter())
	dir := logFile(t, "one\ntwo\nthr")
	path := filepath.Join(dir, "app.log")

	// From one line before the end, then lines as they are completed.
	st := follow(t, h, dir, `{"lines": 1}`, "")
	expect(t, st, `{"line":"two"}#8`)
	appendTo(t, path, "ee\nfour\n")
	expect(t, st, `{"line":"three"}#14`, `{"line":"four"}#19`)

	// Truncated: a gap, then the file from its start.
	write(t, path, "new\n")
	expect(t, st, "gap: the file was truncated: reading it again from its start", `{"line":"new"}#4`)

	// Replaced (rotated): the rest of the old file, a gap, the new file.
	appendTo(t, path, "last of the old\n")
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	write(t, path, "first of the new\n")
	expect(t, st, `{"line":"last of the old"}#20`,
		"gap: the file was replaced: reading the new one from its start", `{"line":"first of the new"}#17`)

	// A cursor resumes after the line it came with.
	appendTo(t, path, "second\n")
	expect(t, follow(t, h, dir, `{}`, "17"), `{"line":"second"}#24`)

	// A cursor past the end: the file was truncated since.
	expect(t, follow(t, h, dir, `{}`, "999"), "gap: the file was truncated: reading it again from its start",
		`{"line":"first of the new"}#17`)
	_, err := follow(t, h, dir, `{}`, "x").Recv()
	var ue *sdk.UpstreamError
	if !errors.As(err, &ue) || ue.Kind != sdk.KindInvalidArgument || ue.Message != "cursor: not a cursor of this tool" {
		t.Fatalf("bad cursor: %v", err)
	}
}

// sender records a stream's items.
type sender struct{ items chan sdk.Item }

func (s sender) Item(it sdk.Item) error { s.items <- it; return nil }
func (s sender) Gap(string) error       { return nil }

// The host ends every stream by cancelling its context: Stream must stop
// and return at once, even while it waits for new lines.
func TestStreamStopsOnCancel(t *testing.T) {
	t.Parallel()
	dir := logFile(t, "one\n")
	ctx, cancel := context.WithCancel(context.Background())
	s := sender{items: make(chan sdk.Item, 1)}
	done := make(chan error, 1)
	go func() {
		done <- newAdapter().Stream(ctx, &sdk.Request{Arguments: json.RawMessage(`{"lines": 1}`), Operation: sdk.Operation{
			Config: json.RawMessage(`{"path": "app.log", "poll_interval": "1h"}`), BaseDir: dir}}, s)
	}()
	<-s.items
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Stream returned %v after the host ended it", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Stream runs on after its context was cancelled")
	}
}

// TestExecutable builds the adapter and runs it the way the host does: a
// process launched through go-plugin, with a bare environment.
func TestExecutable(t *testing.T) {
	t.Parallel()
	h := adaptertest.Build(t, ".").Start(t)
	dir := logFile(t, "one\ntwo\n")
	if d, err := h.Describe(ctxT(t)); err != nil || d.Name != "filetail" {
		t.Fatalf("describe: %+v %v", d, err)
	}
	res, ue, err := h.Invoke(ctxT(t), adaptertest.Call{Config: `{"path": "app.log"}`, Args: `{"lines": 1}`, BaseDir: dir})
	if err != nil || ue != nil || string(res.Structured) != `{"cursor":"8","lines":["two"]}` {
		t.Fatalf("invoke: %v %v %v", res, ue, err)
	}
}
