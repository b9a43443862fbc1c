package grpcadapter

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/egress"
	"github.com/crankmcp/crank/plugins/sdk/lru"
)

// Name is the adapter's name as used in operation files.
const Name = "grpc"

// version is the adapter's build version, reported by Describe.
const version = "0.1.0"

// adapter is the gRPC adapter. It is safe for concurrent use.
type adapter struct {
	conns   connPool
	schemas schemaCache
	configs *sdk.Config[configFields, *opState]
}

var (
	_ sdk.Adapter            = (*adapter)(nil)
	_ sdk.OperationValidator = (*adapter)(nil)
	_ sdk.OperationExpander  = (*adapter)(nil)
	_ sdk.Streamer           = (*adapter)(nil)
)

// New returns the gRPC adapter. The value also implements
// sdk.OperationValidator, sdk.OperationExpander and sdk.Streamer. Each
// adapter has its own connections and descriptor caches.
func New() sdk.Adapter {
	return &adapter{configs: newConfigs(), schemas: schemaCache{lru.New[string, *schemaEntry](maxCachedSchemas, nil)}}
}

// Describe implements sdk.Adapter.
func (a *adapter) Describe(context.Context) (*sdk.Description, error) {
	return a.configs.Describe(sdk.Description{Name: Name, Version: version, Protocols: []string{"grpc"}, Modes: []sdk.Mode{sdk.ModeUnary, sdk.ModeWindow}, Egress: true})
}

// ValidateOperation implements sdk.OperationValidator: the config's own
// checks, without contacting the server. Diagnostics never quote values.
func (a *adapter) ValidateOperation(_ context.Context, op *sdk.Operation) []sdk.Diagnostic {
	diags := a.configs.Fresh(op).Diagnostics()
	if d := checkMode(op.Mode); d != nil {
		diags = append(diags, *d)
	}
	return diags
}

func checkMode(m sdk.Mode) *sdk.Diagnostic {
	switch m {
	case sdk.ModeUnary, sdk.ModeWindow, 0:
		return nil
	}
	d := sdk.Errorf("", "the grpc adapter serves modes unary and window, not %s", modeName(m))
	return &d
}

func modeName(m sdk.Mode) string {
	return strings.ToLower(strings.TrimPrefix(m.String(), "EXECUTION_MODE_"))
}

// ExpandOperation implements sdk.OperationExpander: it loads the
// descriptors (fresh, so a reload sees a changed service) and derives the
// tool of a method entry, or one tool per method of a service entry.
func (a *adapter) ExpandOperation(ctx context.Context, op *sdk.Operation) ([]sdk.Tool, []sdk.Diagnostic) {
	p := a.configs.Fresh(op)
	diags := p.Diagnostics()
	if p.Err() != nil {
		return nil, diags
	}
	c := p.Value.cfg
	if d := checkMode(op.Mode); d != nil {
		return nil, append(diags, *d)
	}
	set, le := a.loadSet(ctx, c, op.Timeout, true)
	if le != nil {
		return nil, append(diags, sdk.Errorf(le.field, "%s", le.msg))
	}
	sd, err := set.service(c.service)
	if err != nil {
		field := "service"
		if c.method != "" {
			field = "method"
		}
		return nil, append(diags, sdk.Errorf(field, "%v", err))
	}
	streamMode := op.Mode == sdk.ModeWindow

	if c.method != "" {
		md := sd.Methods().ByName(protoreflect.Name(c.method))
		if md == nil {
			return nil, append(diags, sdk.Errorf("method", "service %s has no method %s (methods: %s)", c.service, c.method, methodNames(sd)))
		}
		if why := servable(md, streamMode, false); why != "" {
			return nil, append(diags, sdk.Errorf("method", "%s", why))
		}
		if d := checkCursorField(c, md); d != nil {
			return nil, append(diags, *d)
		}
		m := newMethodInfo(c, set, md)
		p.Value.method.Store(m)
		tool, err := m.tool("")
		if err != nil {
			return nil, append(diags, sdk.Errorf("method", "%v", err))
		}
		return []sdk.Tool{tool}, diags
	}

	// A whole service: one tool per servable method.
	methods := sd.Methods()
	wanted := map[string]bool{}
	for i, name := range c.methods {
		if methods.ByName(protoreflect.Name(name)) == nil {
			diags = append(diags, sdk.Errorf(fmt.Sprintf("methods[%d]", i), "service %s has no method %s (methods: %s)", c.service, name, methodNames(sd)))
		}
		wanted[name] = true
	}
	if hasError(diags) {
		return nil, diags
	}
	prefix := op.Name + "_"
	if c.hasPrefix {
		prefix = c.prefix
	}
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(op.Config, &fields) // an object: prepared above
	delete(fields, "service")
	delete(fields, "methods")
	delete(fields, "tool_prefix")
	var tools []sdk.Tool
	used := map[string]bool{}
	for i := 0; i < methods.Len(); i++ {
		md := methods.Get(i)
		if len(wanted) > 0 && !wanted[string(md.Name())] {
			continue
		}
		if why := servable(md, streamMode, true); why != "" {
			diags = append(diags, sdk.Diagnostic{Severity: sdk.SeverityWarning, Field: "service", Message: "skipped: " + why})
			continue
		}
		if d := checkCursorField(c, md); d != nil {
			diags = append(diags, sdk.Diagnostic{Severity: sdk.SeverityWarning, Field: d.Field, Message: "skipped " + string(md.Name()) + ": " + d.Message})
			continue
		}
		name := toolName(prefix, string(md.Name()), used)
		fields["method"], _ = json.Marshal(c.service + "/" + string(md.Name()))
		cfgJSON, _ := json.Marshal(fields)
		mc := *c
		mc.method = string(md.Name())
		m := newMethodInfo(&mc, set, md)
		st := &opState{cfg: &mc}
		st.method.Store(m)
		a.configs.Put(&sdk.Operation{Config: cfgJSON, BaseDir: op.BaseDir}, st)
		tool, err := m.tool(name)
		if err != nil {
			diags = append(diags, sdk.Diagnostic{Severity: sdk.SeverityWarning, Field: "service", Message: fmt.Sprintf("skipped %s: %v", md.Name(), err)})
			continue
		}
		tool.Config = cfgJSON
		tools = append(tools, tool)
	}
	if len(tools) == 0 {
		mode := "unary"
		if streamMode {
			mode = "window"
		}
		return nil, append(diags, sdk.Errorf("service", "no method of %s can be served in mode %s", c.service, mode))
	}
	return tools, diags
}

func hasError(diags []sdk.Diagnostic) bool {
	for _, d := range diags {
		if d.Severity == sdk.SeverityError {
			return true
		}
	}
	return false
}

func methodNames(sd protoreflect.ServiceDescriptor) string {
	var names []string
	for i := 0; i < sd.Methods().Len(); i++ {
		names = append(names, string(sd.Methods().Get(i).Name()))
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// servable explains why a method cannot be served in the entry's mode, or
// returns "". In window mode a server-streaming or bidirectional method is
// streamed; a unary or client-streaming method (one answer each) can be
// polled (transport_behavior: request_response), which only a method entry
// can ask for, so a whole-service import in window mode takes its
// server-streaming and bidirectional methods only.
func servable(md protoreflect.MethodDescriptor, windowMode, serviceImport bool) string {
	name := methodName(md)
	switch {
	case md.IsStreamingClient() && md.IsStreamingServer() && !windowMode:
		return name + " is a bidirectional-streaming method: serve it with mode: window or session (the host sends the requests array, then collects a bounded window of the answers)"
	case md.IsStreamingServer() && !windowMode:
		return name + " is a server-streaming method: serve it with mode: window (the host collects a bounded window of its messages)"
	case !md.IsStreamingServer() && windowMode && serviceImport:
		return name + " is " + onceKind(md) + " method: serve it with mode: unary (or poll it in a window from its own entry, with transport_behavior: request_response)"
	}
	return ""
}

// onceKind names the kind of a method that answers once: "a unary" or "a
// client-streaming".
func onceKind(md protoreflect.MethodDescriptor) string {
	if md.IsStreamingClient() {
		return "a client-streaming"
	}
	return "a unary"
}

func methodName(md protoreflect.MethodDescriptor) string {
	return string(md.Parent().FullName()) + "/" + string(md.Name())
}

// invokeRefusal explains why Invoke (a unary call or a window's poll)
// cannot call a server-streaming or bidirectional method.
func (m *methodInfo) invokeRefusal() string {
	if m.desc.IsStreamingClient() {
		return methodName(m.desc) + " is a bidirectional-streaming method: it is read as a stream (mode: window or session, with transport_behavior: server_stream), not called"
	}
	return methodName(m.desc) + " is a server-streaming method: it is read as a stream (mode: window with transport_behavior: server_stream), not called"
}

// streamRefusal explains why Stream cannot read a method.
func (m *methodInfo) streamRefusal() string {
	return methodName(m.desc) + " is " + onceKind(m.desc) + " method: it answers once and cannot be read as a stream; poll it in a window with transport_behavior: request_response, or use mode: unary"
}

// toolName derives an MCP tool name from a method name: prefix plus the
// method in snake_case, unique among used, at most 128 characters.
func toolName(prefix, method string, used map[string]bool) string {
	base := prefix + snakeCase(method)
	if len(base) > 128 {
		sum := sha256.Sum256([]byte(base))
		base = base[:119] + "_" + hex.EncodeToString(sum[:4])
	}
	name := base
	for n := 2; used[name]; n++ {
		suffix := "_" + strconv.Itoa(n)
		name = base[:min(len(base), 128-len(suffix))] + suffix
	}
	used[name] = true
	return name
}

// snakeCase turns GetUserByID into get_user_by_id.
func snakeCase(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		isUpper := c >= 'A' && c <= 'Z'
		if isUpper && i > 0 {
			prev := s[i-1]
			prevLower := prev >= 'a' && prev <= 'z' || prev >= '0' && prev <= '9'
			nextLower := i+1 < len(s) && s[i+1] >= 'a' && s[i+1] <= 'z'
			prevUpper := prev >= 'A' && prev <= 'Z'
			if prevLower || prevUpper && nextLower {
				b.WriteByte('_')
			}
		}
		if isUpper {
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
	return b.String()
}

// methodInfo is a resolved method with everything a call needs.
type methodInfo struct {
	desc       protoreflect.MethodDescriptor
	fullMethod string
	in, out    protoreflect.MessageDescriptor
	// wrappedIn is true when the request's JSON form is not an object: the
	// arguments carry it under argWrapKey.
	wrappedIn bool
	jsonNames bool
	// maxReqItems and maxReqBytes bound the requests array of a
	// client-streaming or bidirectional call.
	maxReqItems int
	maxReqBytes int
	// resumes: a request field takes a window's cursor (cursor_field).
	resumes   bool
	set       *schemaSet
	unmarshal protojson.UnmarshalOptions
	marshal   protojson.MarshalOptions
}

func newMethodInfo(c *config, set *schemaSet, md protoreflect.MethodDescriptor) *methodInfo {
	return &methodInfo{
		desc:        md,
		fullMethod:  "/" + string(md.Parent().FullName()) + "/" + string(md.Name()),
		in:          md.Input(),
		out:         md.Output(),
		wrappedIn:   messageJSONKind(md.Input()) != jsonObject,
		jsonNames:   c.jsonNames,
		maxReqItems: c.maxReqItems,
		maxReqBytes: c.maxReqBytes,
		resumes:     c.cursorField != "",
		set:         set,
		unmarshal:   protojson.UnmarshalOptions{Resolver: set.types},
		marshal: protojson.MarshalOptions{
			Resolver:          set.types,
			UseProtoNames:     !c.jsonNames,
			EmitDefaultValues: c.emitDefs,
		},
	}
}

// itemSchema is the JSON Schema of one message of a server stream as the
// window item Stream sends (its protojson form, not wrapped), nil when no
// schema describes it (google.protobuf.Value).
func (m *methodInfo) itemSchema() json.RawMessage {
	item := messageSchema(m.out, schemaOptions{jsonNames: m.jsonNames, output: true})
	if item == nil {
		return nil
	}
	b, err := json.Marshal(item)
	if err != nil {
		return nil
	}
	return b
}

// messageSchema is the JSON Schema of one message in its protojson form,
// not wrapped, with its $defs; nil when no schema describes it.
func messageSchema(md protoreflect.MessageDescriptor, opts schemaOptions) map[string]any {
	wrapKey := argWrapKey
	if opts.output {
		wrapKey = resultWrapKey
	}
	s, wrapped, ok := toolSchema(md, opts, wrapKey)
	if !ok {
		return nil
	}
	var top map[string]any
	if json.Unmarshal(s, &top) != nil {
		return nil
	}
	if !wrapped {
		return top
	}
	props, _ := top["properties"].(map[string]any)
	item, _ := props[wrapKey].(map[string]any)
	if item == nil {
		return nil
	}
	if defs, ok := top["$defs"]; ok {
		item["$defs"] = defs
	}
	return item
}

// requestsSchema is the input schema of a client-streaming or
// bidirectional method: {"requests": [message, ...]}, at most maxReqItems
// messages (the byte bound has no JSON Schema keyword: newRequests checks
// it).
func (m *methodInfo) requestsSchema() (json.RawMessage, bool) {
	item := messageSchema(m.in, schemaOptions{jsonNames: m.jsonNames})
	if item == nil {
		return nil, false
	}
	defs, hasDefs := item["$defs"]
	delete(item, "$defs")
	top := map[string]any{
		"type": "object",
		"properties": map[string]any{requestsKey: map[string]any{
			"type":     "array",
			"items":    item,
			"maxItems": m.maxReqItems,
			"description": fmt.Sprintf("The %s messages sent, in order, before the call half-closes: at most %d, of at most %d bytes encoded in all.",
				m.in.FullName(), m.maxReqItems, m.maxReqBytes),
		}},
		"required":             []string{requestsKey},
		"additionalProperties": false,
	}
	if hasDefs {
		top["$defs"] = defs
	}
	b, err := json.Marshal(top)
	return b, err == nil
}

// tool describes the method as a tool named name ("" for the entry
// itself), with schemas derived from its messages.
func (m *methodInfo) tool(name string) (sdk.Tool, error) {
	md := m.desc
	svc := md.Parent().(protoreflect.ServiceDescriptor)
	var in json.RawMessage
	var ok bool
	if md.IsStreamingClient() {
		in, ok = m.requestsSchema()
	} else {
		in, _, ok = toolSchema(m.in, schemaOptions{jsonNames: m.jsonNames}, argWrapKey)
	}
	if !ok {
		return sdk.Tool{}, fmt.Errorf("cannot derive an input schema from %s", m.in.FullName())
	}
	t := sdk.Tool{
		Name:        name,
		Title:       sdk.Humanize(string(md.Name())) + " (" + sdk.Humanize(string(svc.Name())) + ")", // "Get user (Directory)"
		InputSchema: in,
	}
	desc := comment(md)
	if desc == "" {
		desc = "Calls the gRPC method " + strings.TrimPrefix(m.fullMethod, "/") + "."
	}
	switch {
	case md.IsStreamingClient() && md.IsStreamingServer():
		desc += "\nBidirectional: the " + requestsKey + " argument's " + string(m.in.FullName()) + " messages are sent in order, then the call half-closes; each " + string(m.out.FullName()) + " message the server sends is one item."
	case md.IsStreamingClient():
		desc += "\nClient-streaming: the " + requestsKey + " argument's " + string(m.in.FullName()) + " messages are sent in order, then the call half-closes; the server's one answer is the result."
	case md.IsStreamingServer():
		desc += "\nServer-streaming: each " + string(m.out.FullName()) + " message the server sends is one item."
	}
	if md.IsStreamingServer() {
		t.ItemSchema = m.itemSchema()
		// A window resumes only where a request field takes its cursor.
		t.ResumesStream = m.resumes
	} else if out, _, ok := toolSchema(m.out, schemaOptions{jsonNames: m.jsonNames, output: true}, resultWrapKey); ok {
		t.OutputSchema = out
	}
	if opts, ok := md.Options().(*descriptorpb.MethodOptions); ok {
		if opts.GetDeprecated() {
			desc = "Deprecated. " + desc
		}
		switch opts.GetIdempotencyLevel() {
		case descriptorpb.MethodOptions_NO_SIDE_EFFECTS:
			t.Annotations.ReadOnly, t.Annotations.Destructive, t.Annotations.Idempotent = sdk.Bool(true), sdk.Bool(false), sdk.Bool(true)
		case descriptorpb.MethodOptions_IDEMPOTENT:
			t.Annotations.ReadOnly, t.Annotations.Idempotent = sdk.Bool(false), sdk.Bool(true)
		}
	}
	if t.Annotations == (sdk.Annotations{}) {
		// No idempotency_level: the method's name says (the SDK's rule).
		t.Annotations = sdk.NameAnnotations(string(md.Name()))
	}
	t.Description = desc
	return t, nil
}

// opState is an operation config as prepared, with its method once
// resolved.
type opState struct {
	cfg    *config
	method atomic.Pointer[methodInfo]
	mu     sync.Mutex // serialises resolving the method
}

// loadSet loads the descriptors of c's source, through the schema cache.
func (a *adapter) loadSet(ctx context.Context, c *config, hostTimeout time.Duration, fresh bool) (*schemaSet, *loadError) {
	conn, err := a.conns.get(c)
	if err != nil {
		return nil, &loadError{field: "target", kind: kindInvalid, msg: "cannot use the target: " + err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout(hostTimeout))
	defer cancel()
	set, err := a.schemas.get(c.schemaKey(), fresh, func() (*schemaSet, error) { return loadSchema(ctx, c, conn) })
	if err != nil {
		var le *loadError
		if errors.As(err, &le) {
			return nil, le
		}
		return nil, &loadError{field: "target", kind: kindTransport, msg: err.Error()}
	}
	return set, nil
}

// prepare finds the parsed config and resolved method of a call, parsing
// and loading descriptors on first use.
func (a *adapter) prepare(ctx context.Context, req *sdk.Request) (*config, *methodInfo, *sdk.UpstreamError) {
	op := &req.Operation
	p := a.configs.Get(op)
	if p.Err() != nil {
		return nil, nil, &sdk.UpstreamError{Kind: kindInvalid, Message: p.Err().Error()}
	}
	st := p.Value
	c := st.cfg
	if c.method == "" {
		return nil, nil, &sdk.UpstreamError{Kind: kindInvalid, Upstream: c.upstream(),
			Message: "the config names a whole service: the host calls the tools it expands to, one per method"}
	}
	if m := st.method.Load(); m != nil {
		return c, m, nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if m := st.method.Load(); m != nil {
		return c, m, nil
	}
	set, le := a.loadSet(ctx, c, op.Timeout, false)
	if le != nil {
		return nil, nil, &sdk.UpstreamError{Kind: le.kind, Upstream: c.upstream(), Message: "cannot load the method's descriptors: " + le.msg,
			Retryable: (le.kind == kindTransport || le.kind == kindTimeout) && !strings.Contains(le.msg, egress.ErrRefused.Error())}
	}
	sd, err := set.service(c.service)
	if err != nil {
		return nil, nil, &sdk.UpstreamError{Kind: kindInvalid, Upstream: c.upstream(), Message: err.Error()}
	}
	md := sd.Methods().ByName(protoreflect.Name(c.method))
	if md == nil {
		return nil, nil, &sdk.UpstreamError{Kind: kindInvalid, Upstream: c.upstream(),
			Message: fmt.Sprintf("service %s has no method %s (methods: %s)", c.service, c.method, methodNames(sd))}
	}
	m := newMethodInfo(c, set, md)
	st.method.Store(m)
	return c, m, nil
}

// outgoing adds the configured metadata and the caller's trace context.
func outgoing(ctx context.Context, c *config) context.Context {
	kv := c.metadata
	if tp, ts := sdk.TraceHeaders(ctx); tp != "" {
		kv = slices.Clip(kv)
		kv = append(kv, "traceparent", tp)
		if ts != "" {
			kv = append(kv, "tracestate", ts)
		}
	}
	if len(kv) == 0 {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

// Invoke implements sdk.Adapter: one unary call.
func (a *adapter) Invoke(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	c, m, ue := a.prepare(ctx, req)
	if ue != nil {
		return nil, ue
	}
	if m.desc.IsStreamingServer() {
		return nil, &sdk.UpstreamError{Kind: kindInvalid, Upstream: c.upstream(), Message: m.invokeRefusal()}
	}
	// Every request is converted and bounded before anything is sent.
	var in *dynamicpb.Message
	var reqs []*dynamicpb.Message
	var err error
	if m.desc.IsStreamingClient() {
		reqs, err = m.newRequests(req.Arguments)
	} else {
		in, err = m.newRequest(c, req.Arguments, req.Cursor)
	}
	if err != nil {
		return nil, &sdk.UpstreamError{Kind: kindInvalid, Upstream: c.upstream(), Message: err.Error()}
	}
	conn, err := a.conns.get(c)
	if err != nil {
		return nil, &sdk.UpstreamError{Kind: kindInvalid, Upstream: c.upstream(), Message: "cannot use the target: " + err.Error()}
	}
	timeout := c.callTimeout(req.Operation.Timeout)
	callCtx, cancel := context.WithTimeoutCause(ctx, timeout, errCallTimeout)
	defer cancel()
	out := dynamicpb.NewMessage(m.out)
	callCtx, span := m.startSpan(callCtx, c)
	if m.desc.IsStreamingClient() {
		err = clientStreamCall(outgoing(callCtx, c), conn, m, c, reqs, out)
	} else {
		err = conn.Invoke(outgoing(callCtx, c), m.fullMethod, in, out, grpc.MaxCallRecvMsgSize(c.maxBytes))
	}
	endSpan(span, err)
	if err != nil {
		return nil, callError(ctx, callCtx, c, m, timeout, err)
	}
	data, err := m.marshalResult(out)
	if err != nil {
		return nil, &sdk.UpstreamError{Kind: kindBadResponse, Upstream: c.upstream(), Message: "cannot render the answer as JSON: " + cleanProtoError(err)}
	}
	return &sdk.Result{Structured: data, ContentType: "application/json"}, nil
}

// Stream implements sdk.Streamer for server-streaming methods: each
// response message is one item; the server's status ends the stream (OK:
// a normal end, otherwise an upstream error); cancelling ctx cancels the
// upstream call. The call's timeout bounds the wait for the server's first
// answer (its response headers or first message); after that the host
// bounds the stream (duration, items, bytes, idleness).
func (a *adapter) Stream(ctx context.Context, req *sdk.Request, send sdk.StreamSender) (err error) {
	c, m, ue := a.prepare(ctx, req)
	if ue != nil {
		return ue
	}
	if !m.desc.IsStreamingServer() {
		return &sdk.UpstreamError{Kind: kindInvalid, Upstream: c.upstream(), Message: m.streamRefusal()}
	}
	bidi := m.desc.IsStreamingClient()
	// Every request is converted and bounded before anything is sent.
	var reqs []*dynamicpb.Message
	if bidi {
		reqs, err = m.newRequests(req.Arguments)
	} else {
		var in *dynamicpb.Message
		in, err = m.newRequest(c, req.Arguments, req.Cursor)
		reqs = []*dynamicpb.Message{in}
	}
	if err != nil {
		return &sdk.UpstreamError{Kind: kindInvalid, Upstream: c.upstream(), Message: err.Error()}
	}
	conn, err := a.conns.get(c)
	if err != nil {
		return &sdk.UpstreamError{Kind: kindInvalid, Upstream: c.upstream(), Message: "cannot use the target: " + err.Error()}
	}
	timeout := c.callTimeout(req.Operation.Timeout)
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	answered := make(chan struct{})
	timer := time.AfterFunc(timeout, func() {
		select {
		case <-answered:
		default:
			cancel(errCallTimeout)
		}
	})
	defer timer.Stop()
	desc := &grpc.StreamDesc{StreamName: string(m.desc.Name()), ServerStreams: true, ClientStreams: bidi}
	sctx, span := m.startSpan(sctx, c)
	defer func() { endSpan(span, err) }()
	cs, err := conn.NewStream(outgoing(sctx, c), desc, m.fullMethod, grpc.MaxCallRecvMsgSize(c.maxBytes))
	if err != nil {
		return streamEnd(ctx, sctx, c, m, timeout, err)
	}
	go func() {
		defer sdk.Recover("grpc adapter: stream headers", nil)
		// Headers arrive with the first message or before it; Header
		// returns early when the stream ends.
		if _, err := cs.Header(); err == nil {
			close(answered)
			timer.Stop()
		}
	}()
	if bidi {
		// The requests go out while the answers come in, so a server that
		// answers each request before reading the next is served too; the
		// stream half-closes after the last one. A send that fails aborts
		// the stream, and RecvMsg reports why; the window ending first
		// cancels sctx, which ends the sends.
		sent := make(chan struct{})
		go func() {
			defer close(sent)
			defer sdk.Recover("grpc adapter: stream requests", nil)
			_ = sendRequests(cs, reqs)
		}()
		defer func() {
			cancel(nil)
			<-sent
		}()
	} else if err := sendRequests(cs, reqs); err != nil {
		return streamEnd(ctx, sctx, c, m, timeout, err)
	}
	for n := 1; ; n++ {
		out := dynamicpb.NewMessage(m.out)
		if err := cs.RecvMsg(out); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return streamEnd(ctx, sctx, c, m, timeout, err)
		}
		data, err := m.marshalResult(out)
		if err != nil {
			return &sdk.UpstreamError{Kind: kindBadResponse, Upstream: c.upstream(), Message: fmt.Sprintf("message %d cannot be rendered as JSON: %s", n, cleanProtoError(err))}
		}
		// A gRPC message has no id or resume point of its own: the host's
		// cursor_path can take one from the item, and cursor_field sends it
		// back on the next window.
		if err := send.Item(sdk.Item{Data: data}); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
	}
}

// clientStreamCall is a client-streaming call: the requests in order, a
// half-close, and the server's one answer into out.
func clientStreamCall(ctx context.Context, conn grpc.ClientConnInterface, m *methodInfo, c *config, reqs []*dynamicpb.Message, out *dynamicpb.Message) error {
	desc := &grpc.StreamDesc{StreamName: string(m.desc.Name()), ClientStreams: true}
	cs, err := conn.NewStream(ctx, desc, m.fullMethod, grpc.MaxCallRecvMsgSize(c.maxBytes))
	if err != nil {
		return err
	}
	if err := sendRequests(cs, reqs); err != nil {
		return err
	}
	// For a stream without server streaming RecvMsg reads the one answer
	// and the status after it.
	return cs.RecvMsg(out)
}

// sendRequests sends the requests of a call in order, then half-closes.
// It stops early, without an error, when the server has already ended
// the call (io.EOF): RecvMsg then reports its status.
func sendRequests(cs grpc.ClientStream, reqs []*dynamicpb.Message) error {
	for _, r := range reqs {
		if err := cs.SendMsg(r); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
	return cs.CloseSend()
}

// streamEnd maps the error that ended a stream: the host's cancellation
// stays a context error, anything else becomes an upstream error.
func streamEnd(ctx, sctx context.Context, c *config, m *methodInfo, timeout time.Duration, err error) error {
	if status.Code(err) == codes.DeadlineExceeded && nearDeadline(ctx) {
		// The host's deadline travelled to the server, whose timer fired a
		// moment before ours: let ours fire so the host sees its own cut.
		d, _ := ctx.Deadline()
		t := time.NewTimer(time.Until(d) + 10*time.Millisecond)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(context.Cause(sctx), errCallTimeout) {
		return &sdk.UpstreamError{Kind: kindTimeout, Upstream: c.upstream(), Status: codeName(codes.DeadlineExceeded),
			Message: "DEADLINE_EXCEEDED: the upstream did not start answering the stream within " + timeout.String(), Retryable: true}
	}
	return callError(ctx, nil, c, m, 0, err)
}

// startSpan starts the client span of a call of the method: named
// service/method, with the target's address (never the config's
// metadata); the call's metadata carries its trace context (outgoing).
func (m *methodInfo) startSpan(ctx context.Context, c *config) (context.Context, *sdk.Span) {
	svc, meth, _ := strings.Cut(strings.TrimPrefix(m.fullMethod, "/"), "/")
	return sdk.StartSpan(ctx, svc+"/"+meth, sdk.SpanClient, sdk.Attr("rpc.system", "grpc"),
		sdk.Attr("rpc.service", svc), sdk.Attr("rpc.method", meth), sdk.Attr("server.address", c.target))
}

// endSpan ends a call's span with the call's gRPC status.
func endSpan(span *sdk.Span, err error) {
	if span == nil {
		return
	}
	st := status.Convert(err)
	span.SetAttributes(sdk.Attr("rpc.grpc.status_code", int(st.Code())))
	if err != nil && !errors.Is(err, io.EOF) && st.Code() != codes.OK {
		span.Fail(codeName(st.Code()))
	}
	span.End()
}
