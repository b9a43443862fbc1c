package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/crankmcp/crank/plugins/sdk"
)

// name is the adapter's name, which Describe reports.
const name = "filetail"

// version is the adapter's build version, which Describe reports.
const version = "0.1.0"

// What the config's tags do not say: a call's default number of lines,
// and the shortest poll interval.
const (
	defaultLines = 10
	minPoll      = 10 * time.Millisecond
)

// config is an operation's config as the operations file writes it. It is
// declared once: sdk.Config decodes it, reports unknown fields, values of
// the wrong type and values out of bounds by their names, fills in the
// defaults, and derives the JSON Schema that Describe publishes, all from
// its fields' tags.
type config struct {
	Path         string       `reach:"file" json:"path" jsonschema:"The text file to serve; a relative path is relative to the operations file."`
	MaxLines     int          `json:"max_lines,omitempty" default:"1000" zero:"default" minimum:"1" maximum:"100000" jsonschema:"The most lines one call may ask for."`
	MaxLineBytes int          `json:"max_line_bytes,omitempty" default:"4096" zero:"default" minimum:"1" maximum:"1048576" jsonschema:"Longer lines are cut to this many bytes."`
	PollInterval sdk.Duration `json:"poll_interval,omitempty" default:"250ms" jsonschema:"How often a stream looks for new lines, e.g. 100ms."`
}

// file is a checked config: what the calls of an operation use. It is
// prepared once per distinct config and shared by all its calls.
type file struct {
	path         string // absolute
	upstream     string // the path as written, for errors
	maxLines     int
	maxLineBytes int
	poll         time.Duration
}

// adapter is the filetail adapter. It is safe for concurrent use, as the
// SDK calls it from many goroutines.
type adapter struct {
	configs sdk.Config[config, *file]
}

// The optional interfaces it implements: each becomes a capability the
// host learns from Describe.
var (
	_ sdk.OperationValidator = (*adapter)(nil)
	_ sdk.OperationExpander  = (*adapter)(nil)
	_ sdk.Streamer           = (*adapter)(nil)
)

func newAdapter() *adapter {
	return &adapter{configs: sdk.Config[config, *file]{Name: name, Prepare: prepare}}
}

// prepare checks a decoded config. Diagnostics name the field and never
// quote its value: configs may hold secrets.
func prepare(op *sdk.Operation, c *config, d *sdk.Diagnostics) *file {
	f := &file{
		path:         op.ResolvePath(c.Path),
		upstream:     "file " + c.Path,
		maxLines:     c.MaxLines,
		maxLineBytes: c.MaxLineBytes,
		poll:         time.Duration(c.PollInterval),
	}
	switch fi, err := os.Stat(f.path); {
	case c.Path == "":
		d.Errorf("path", "is required: the file to serve")
	case errors.Is(err, fs.ErrNotExist):
		d.Warnf("path", "no such file yet: calls fail until it exists")
	case err != nil:
		d.Errorf("path", "cannot be read: %v", errors.Unwrap(err))
	case fi.IsDir():
		d.Errorf("path", "is a directory, not a file")
	}
	if f.poll < minPoll {
		d.Errorf("poll_interval", "must be at least %s", minPoll)
	}
	if d.Failed() {
		return nil
	}
	return f
}

// Describe implements sdk.Adapter. The host builds sessions and async jobs
// on unary calls and windows, so those two are the modes to list.
func (a *adapter) Describe(context.Context) (*sdk.Description, error) {
	return a.configs.Describe(sdk.Description{
		Name:      name,
		Version:   version,
		Protocols: []string{"file"},
		Modes:     []sdk.Mode{sdk.ModeUnary, sdk.ModeWindow},
	})
}

// ValidateOperation implements sdk.OperationValidator: the host calls it
// when it loads the operations file and fails the load on an error.
// Fresh prepares the config again, so a reload sees the file system anew.
func (a *adapter) ValidateOperation(_ context.Context, op *sdk.Operation) []sdk.Diagnostic {
	return a.configs.Fresh(op).Diagnostics()
}

// Schemas of the tools' arguments, unary result and stream items.
const (
	argsSchema = `{"type": "object", "properties": {"lines": %s}, "additionalProperties": false}`
	tailLines  = `{"type": "integer", "minimum": 0, "maximum": %d, "default": %d, "description": "How many of the last lines to return."}`
	followFrom = `{"type": "integer", "minimum": 0, "maximum": %d, "default": 0, "description": "Start this many lines before the end; 0 follows new lines only. A cursor overrides it."}`
	tailSchema = `{"type": "object", "required": ["lines", "cursor"], "properties": {
		"lines": {"type": "array", "items": {"type": "string"}},
		"cursor": {"type": "string", "description": "The byte offset after the last line: a window of the same file resumes there."}}}`
	lineSchema = `{"type": "object", "required": ["line"], "properties": {"line": {"type": "string"}}}`
)

// ExpandOperation implements sdk.OperationExpander. The entry stays one
// tool (the Tool has no name); what it adds are the schemas, which the
// host publishes unless the operator wrote their own.
func (a *adapter) ExpandOperation(_ context.Context, op *sdk.Operation) ([]sdk.Tool, []sdk.Diagnostic) {
	p := a.configs.Get(op)
	if p.Err() != nil {
		return nil, p.Diagnostics()
	}
	lines := fmt.Sprintf(tailLines, p.Value.maxLines, min(defaultLines, p.Value.maxLines))
	if op.Mode == sdk.ModeWindow {
		lines = fmt.Sprintf(followFrom, p.Value.maxLines)
	}
	return []sdk.Tool{{
		InputSchema:   json.RawMessage(fmt.Sprintf(argsSchema, lines)),
		OutputSchema:  json.RawMessage(tailSchema),
		ItemSchema:    json.RawMessage(lineSchema),
		ResumesStream: true, // a window resumes at the byte offset of its cursor
		Annotations:   sdk.Annotations{ReadOnly: sdk.Bool(true), OpenWorld: sdk.Bool(false)},
	}}, nil
}

// call returns the prepared config of a request and its lines argument
// (def, at most max_lines, when absent), or the upstream error that
// answers the call.
func (a *adapter) call(req *sdk.Request, def int) (*file, int, error) {
	p := a.configs.Get(&req.Operation)
	if p.Err() != nil {
		return nil, 0, &sdk.UpstreamError{Kind: sdk.KindInvalidArgument, Message: p.Err().Error()}
	}
	f := p.Value
	var args struct {
		Lines *int `json:"lines"`
	}
	if len(req.Arguments) > 0 && json.Unmarshal(req.Arguments, &args) != nil {
		return nil, 0, f.invalid("lines must be an integer")
	}
	n := min(def, f.maxLines)
	if args.Lines != nil {
		n = *args.Lines
	}
	if n < 0 || n > f.maxLines {
		return nil, 0, f.invalid(fmt.Sprintf("lines must be from 0 to %d", f.maxLines))
	}
	return f, n, nil
}

// Invoke implements sdk.Adapter: the file's last lines, and the cursor a
// stream of the same file resumes at.
func (a *adapter) Invoke(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	f, n, err := a.call(req, defaultLines)
	if err != nil {
		return nil, err
	}
	// The operator's timeout bounds the call. The host waits a little
	// longer (the call's deadline, ctx), so that a slow read ends here
	// as a timeout error rather than as a call the host gave up on.
	if req.Operation.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, req.Operation.Timeout)
		defer cancel()
	}
	h, start, size, err := f.open(ctx, n)
	if err != nil {
		return nil, f.failure(err)
	}
	defer h.Close()
	lines := []string{}
	end, err := f.read(ctx, h, start, size, func(line string, _ int64) error {
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		return nil, f.failure(err)
	}
	out, err := json.Marshal(map[string]any{"lines": lines, "cursor": strconv.FormatInt(end, 10)})
	if err != nil {
		return nil, err
	}
	return &sdk.Result{Structured: out, Text: strings.Join(lines, "\n"), ContentType: "text/plain"}, nil
}

// Stream implements sdk.Streamer: it follows the file until the host ends
// the stream by cancelling ctx (a window's limit, a session's stop), which
// it notices at once while it waits for lines and at the next line while
// it reads them.
func (a *adapter) Stream(ctx context.Context, req *sdk.Request, send sdk.StreamSender) error {
	f, n, err := a.call(req, 0)
	if err != nil {
		return err
	}
	h, start, _, err := f.open(ctx, n)
	if err != nil {
		return f.stop(ctx, err)
	}
	w := &follower{file: f, h: h, off: start, send: send}
	defer func() { w.h.Close() }()
	if req.Cursor != "" {
		if w.off, err = strconv.ParseInt(req.Cursor, 10, 64); err != nil || w.off < 0 {
			return f.invalid("cursor: not a cursor of this tool")
		}
	}
	tick := time.NewTicker(f.poll)
	defer tick.Stop()
	for {
		if err := w.look(ctx); err != nil {
			return w.stop(ctx, err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// stop is what Stream returns after err: nothing when the host ended the
// stream, else the upstream error.
func (f *file) stop(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return f.failure(err)
}

// invalid is the error of a request that cannot succeed as it is.
func (f *file) invalid(msg string) *sdk.UpstreamError {
	return &sdk.UpstreamError{Kind: sdk.KindInvalidArgument, Upstream: f.upstream, Message: msg}
}

// failure is the upstream error of a failed file access, with what the
// host needs to decide: may a retry succeed, or can it not?
func (f *file) failure(err error) *sdk.UpstreamError {
	ue := &sdk.UpstreamError{Kind: sdk.KindTransport, Upstream: f.upstream, Message: err.Error()}
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		ue.Message = pe.Op + ": " + pe.Err.Error() // without the resolved path
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		ue.Kind, ue.Message, ue.Retryable = sdk.KindTimeout, "the operation's timeout passed", true
	case errors.Is(err, context.Canceled):
		ue.Kind, ue.Message = sdk.KindCancelled, "the call was cancelled"
	case errors.Is(err, fs.ErrNotExist):
		ue.Retryable = true // it may yet be created
	case errors.Is(err, fs.ErrPermission):
		ue.Rejected = true // no retry helps until the operator changes something
	}
	return ue
}
