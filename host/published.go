package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/yosida95/uritemplate/v3"

	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

// Resources, resource templates and prompts.
//
// An adapter that publishes them beside its tools (sdk.Publisher, such as
// the mcp adapter for an upstream's, when the entry asks for them) lists
// them in its expansion; the host checks each as a load does (the MCP
// object's required fields, a URI or URI template the endpoint can serve,
// a prompt name like a tool name, and no two entries publishing the same
// URI, URI template or prompt name, naming both) and keeps them in its
// table of tools, so that a re-expansion replaces them in the same step as
// the entry's tools. A read or a rendering goes to the publishing entry's
// adapter with the publication's config, bounded by the entry's timeout;
// its answer is redacted like a tool result.

// PublicationKind says what a Publication is.
type PublicationKind string

// Publication kinds, as the policy's tool.mode names them.
const (
	KindResource         PublicationKind = "resource"
	KindResourceTemplate PublicationKind = "resource_template"
	KindPrompt           PublicationKind = "prompt"
)

// Publication is one resource, resource template or prompt a host
// serves.
type Publication struct {
	Kind PublicationKind
	// Key is the resource's URI, the template's URI template or the
	// prompt's name: unique per kind on a host.
	Key string
	// Name and Title are the MCP object's.
	Name, Title string
	// Definition is the MCP object (Resource, ResourceTemplate or Prompt)
	// as JSON, as clients see it.
	Definition json.RawMessage
	// Entry is the operations-file entry that publishes it; Adapter its
	// adapter.
	Entry, Adapter string
	// Completes: a prompt's or template's arguments complete
	// (Host.Complete); Subscribes: a resource or template can be
	// subscribed to (Host.WatchResource). Both as the adapter said of the
	// entry (complete.go).
	Completes, Subscribes bool
	op                    *boundOp
}

// pubKey indexes publications by kind and key.
type pubKey struct {
	kind PublicationKind
	key  string
}

// publications turns what an adapter published for entry into the
// host's, checking each.
func (h *Host) publications(entry *opsfile.Operation, sup *Supervisor, pub *sdk.Published) ([]*Publication, error) {
	if pub == nil {
		return nil, nil
	}
	var out []*Publication
	add := func(kind PublicationKind, list []sdk.Publication) error {
		for i, p := range list {
			x, err := h.publication(entry, sup, kind, p)
			if err != nil {
				return fmt.Errorf("%s %d the adapter published: %v", kind, i+1, err)
			}
			x.Completes = pub.Completions && kind != KindResource // complete.go
			x.Subscribes = pub.Subscribe && kind != KindPrompt
			out = append(out, x)
		}
		return nil
	}
	if err := add(KindResource, pub.Resources); err != nil {
		return nil, err
	}
	if err := add(KindResourceTemplate, pub.ResourceTemplates); err != nil {
		return nil, err
	}
	if err := add(KindPrompt, pub.Prompts); err != nil {
		return nil, err
	}
	return out, nil
}

func (h *Host) publication(entry *opsfile.Operation, sup *Supervisor, kind PublicationKind, p sdk.Publication) (*Publication, error) {
	var def struct {
		URI         string `json:"uri"`
		URITemplate string `json:"uriTemplate"`
		Name        string `json:"name"`
		Title       string `json:"title"`
	}
	if err := json.Unmarshal(p.Definition, &def); err != nil || !bytes.HasPrefix(bytes.TrimSpace(p.Definition), []byte("{")) {
		return nil, errors.New("its definition is not a JSON object")
	}
	x := &Publication{Kind: kind, Name: def.Name, Title: def.Title, Definition: p.Definition, Entry: entry.Name, Adapter: entry.Adapter}
	if def.Name == "" {
		return nil, errors.New("name is required")
	}
	switch kind {
	case KindResource:
		x.Key = def.URI
		if u, err := url.Parse(def.URI); err != nil || u.Scheme == "" {
			return nil, fmt.Errorf("uri %q is not an absolute URI", def.URI)
		}
	case KindResourceTemplate:
		x.Key = def.URITemplate
		if _, err := uritemplate.New(def.URITemplate); err != nil || !hasScheme(def.URITemplate) {
			return nil, fmt.Errorf("uriTemplate %q is not an absolute RFC 6570 URI template", def.URITemplate)
		}
	case KindPrompt:
		x.Key = def.Name
		if !opsfile.ValidToolName(def.Name) {
			return nil, fmt.Errorf("prompt name %q: use 1 to 128 letters, digits, '_', '-' or '.'", def.Name)
		}
	}
	if err := entry.DerivedReach(p.Config, sup.Description().ConfigSchema); err != nil {
		return nil, fmt.Errorf("%s %q: %w", kind, x.Key, err)
	}
	op := *entry
	if len(p.Config) > 0 {
		op.Config = p.Config
	}
	x.op = h.bind(&op, sup)
	return x, nil
}

// hasScheme reports whether a URI template starts with a scheme.
func hasScheme(tmpl string) bool {
	for i, c := range tmpl {
		switch {
		case c == ':':
			return i > 0
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return false
}

// Publications returns the resources, resource templates and prompts the
// host serves, in load order.
func (h *Host) Publications() []*Publication { return h.tab.Load().pubs }

// Publication returns the publication of kind with key.
func (h *Host) Publication(kind PublicationKind, key string) (*Publication, bool) {
	p, ok := h.tab.Load().pubIndex[pubKey{kind, key}]
	return p, ok
}

// PublicationRequest is one read of a resource or rendering of a prompt.
type PublicationRequest struct {
	// Publication is the resource, resource template or prompt, resolved
	// by Host.Publication.
	Publication *Publication
	// URI is the URI to read (a resource's, or one the template
	// matches); Arguments are a prompt's.
	URI       string
	Arguments map[string]string
	// The caller, as in CallRequest.
	WorkspaceID, AgentID    string
	TraceParent, TraceState string
	SubjectToken, RequestID string
	// The read's client, as in CallRequest, for an upstream that needs
	// its input first (an input-required result, MCP SEP-2322; adapters
	// that list client_requests): with Ask (a client on an MCP session)
	// the host asks the client each input request itself and reads again
	// with its answers; with InputRequired (a client of 2026-07-28) the
	// read fails with *PublicationInput, and Input is the client's retry.
	// The state the client sees is sealed as a call's (input.go).
	Ask                func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
	ClientCapabilities json.RawMessage
	InputRequired      bool
	Input              *InputAnswer
}

// PublicationInput is the error of a read or rendering that needs its
// client's input first (PublicationRequest.InputRequired): the MCP
// inputRequests object, redacted, and the sealed requestState.
type PublicationInput struct {
	Requests     json.RawMessage
	RequestState string
}

func (e *PublicationInput) Error() string { return "the request needs the client's input first" }

// PublicationError is a read or rendering that failed: Code is the
// JSON-RPC error code to answer (the upstream's own, when it answered
// with one), Message says why, redacted.
type PublicationError struct {
	Code    int64
	Message string
	// Data is the error's data as JSON (the upstream's own, redacted);
	// nil when it has none.
	Data json.RawMessage
}

func (e *PublicationError) Error() string { return e.Message }

// JSON-RPC codes of failed reads and renderings.
const (
	codeInvalidParams = -32602
	codeInternalError = -32603
)

// ReadResource reads a resource (a publication of kind KindResource or
// KindResourceTemplate) through the adapter of the entry that publishes
// it: the MCP contents array as JSON, or an object of the contents and
// the upstream's caching hints (sdk.Publisher.ReadResource), redacted.
// Failures are *PublicationError.
func (h *Host) ReadResource(ctx context.Context, req PublicationRequest) (json.RawMessage, error) {
	return h.readPublication(ctx, req, false, func(ctx context.Context, c publicationClient, op sdk.Operation, rc sdk.RequestContext, in readInput) (json.RawMessage, error) {
		return c.ReadResource(ctx, &sdk.ResourceRequest{Context: rc, Operation: op, URI: req.URI, ClientCapabilities: in.caps, Input: in.answer})
	})
}

// GetPrompt renders a prompt (a publication of kind KindPrompt) through
// the adapter of the entry that publishes it: the MCP GetPromptResult as
// JSON, redacted. Failures are *PublicationError.
func (h *Host) GetPrompt(ctx context.Context, req PublicationRequest) (json.RawMessage, error) {
	if err := missingArgument(req); err != nil {
		return nil, err
	}
	return h.readPublication(ctx, req, true, func(ctx context.Context, c publicationClient, op sdk.Operation, rc sdk.RequestContext, in readInput) (json.RawMessage, error) {
		return c.GetPrompt(ctx, &sdk.PromptRequest{Context: rc, Operation: op, Name: req.Publication.Key, Arguments: req.Arguments,
			ClientCapabilities: in.caps, Input: in.answer})
	})
}

// missingArgument is the error of a rendering without an argument its
// prompt requires, naming it; nil when it has them all.
func missingArgument(req PublicationRequest) error {
	p := req.Publication
	if p == nil || p.Kind != KindPrompt {
		return nil // readPublication says so
	}
	var def struct {
		Arguments []struct {
			Name     string `json:"name"`
			Required bool   `json:"required"`
		} `json:"arguments"`
	}
	_ = json.Unmarshal(p.Definition, &def) // checked at load
	for _, a := range def.Arguments {
		if _, ok := req.Arguments[a.Name]; a.Required && !ok {
			return &PublicationError{Code: codeInvalidParams, Message: fmt.Sprintf("prompt %q: missing required argument %q", p.Key, a.Name)}
		}
	}
	return nil
}

// publicationClient is what a read needs of an adapter client.
type publicationClient interface {
	ReadResource(context.Context, *sdk.ResourceRequest) (json.RawMessage, error)
	GetPrompt(context.Context, *sdk.PromptRequest) (json.RawMessage, error)
	Complete(context.Context, *sdk.CompleteRequest) (json.RawMessage, error)
}

// publicationClient is the adapter client of a request of what (a
// publication of op), the call request with its upstream token, and the
// request context, once req has a request id.
func (h *Host) publicationClient(ctx context.Context, op *boundOp, req *PublicationRequest, what string) (*client.Client, CallRequest, sdk.RequestContext, error) {
	if req.RequestID == "" {
		req.RequestID = newRequestID()
	}
	cr := CallRequest{WorkspaceID: req.WorkspaceID, AgentID: req.AgentID, SubjectToken: req.SubjectToken, RequestID: req.RequestID}
	rc := sdk.RequestContext{RequestID: req.RequestID, WorkspaceID: req.WorkspaceID, AgentID: req.AgentID,
		TraceParent: req.TraceParent, TraceState: req.TraceState}
	if res := h.obtainUpstreamToken(ctx, op, &cr); res != nil { // upstream_auth.go
		return nil, cr, rc, &PublicationError{Code: codeInternalError, Message: what + ": " + res.Text}
	}
	c, err := op.sup.Client(ctx)
	if err != nil {
		return nil, cr, rc, &PublicationError{Code: codeInternalError,
			Message: h.redact.String(fmt.Sprintf("%s: adapter %q is not available: %v", what, op.Adapter, err))}
	}
	return c, cr, rc, nil
}

// readInput is what a read tells its adapter of its client: caps, when
// the host takes input-required answers, and the answers of a retry.
type readInput struct {
	caps   json.RawMessage
	answer *sdk.InputResponses
}

func (h *Host) readPublication(ctx context.Context, req PublicationRequest, prompt bool,
	read func(context.Context, publicationClient, sdk.Operation, sdk.RequestContext, readInput) (json.RawMessage, error)) (json.RawMessage, error) {
	p := req.Publication
	if p == nil || (p.Kind == KindPrompt) != prompt {
		return nil, &PublicationError{Code: codeInvalidParams, Message: "the request names no publication of this kind"}
	}
	what := fmt.Sprintf("prompt %q", p.Key)
	if !prompt {
		what = fmt.Sprintf("resource %q", req.URI)
	}
	op := p.op
	ctx, cancel := context.WithTimeout(ctx, op.Timeout+time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()
	c, cr, rc, perr := h.publicationClient(ctx, op, &req, what)
	if perr != nil {
		return nil, perr
	}
	rc.Deadline = deadline
	in, bind, ierr := h.publicationInput(ctx, op, req, what)
	if ierr != nil {
		return nil, ierr
	}
	out, err := read(ctx, c, cr.upstream.operation(op.call), rc, in)
	for round := 1; ; round++ {
		var ir *sdk.InputRequired
		if !errors.As(err, &ir) || in.caps == nil {
			break
		}
		if req.Ask == nil { // the client answers it (2026-07-28)
			state, serr := h.sealInput(ctx, bind, ir.State) // input.go
			if serr != nil {
				return nil, &PublicationError{Code: codeInternalError, Message: what + ": it needs the client's input, and its request state cannot be sealed now (the shared keys are unavailable): retry"}
			}
			return nil, &PublicationInput{Requests: h.redactLogData(cr, ir.Requests), RequestState: state}
		}
		if round > maxPublicationInputRounds {
			return nil, &PublicationError{Code: codeInternalError, Message: fmt.Sprintf("%s: the upstream asked for the client's input %d times", what, maxPublicationInputRounds)}
		}
		responses, aerr := h.askInput(ctx, req, cr, ir.Requests, what)
		if aerr != nil {
			return nil, aerr
		}
		in.answer = &sdk.InputResponses{Responses: responses, State: ir.State}
		out, err = read(ctx, c, cr.upstream.operation(op.call), rc, in)
	}
	var ue *sdk.UpstreamError
	switch {
	case errors.As(err, &ue) && ue.Protocol != nil:
		// The upstream's own JSON-RPC error, as it came.
		pe := cr.upstream.redactProtocol(redactProtocol(h.redact, ue.Protocol))
		return nil, &PublicationError{Code: pe.Code, Message: pe.Message, Data: pe.Data}
	case errors.As(err, &ue):
		code := int64(codeInternalError)
		if n, perr := strconv.ParseInt(ue.Status, 10, 64); perr == nil && n >= -32768 && n <= -32000 {
			code = n // the upstream's own JSON-RPC error, e.g. -32002 resource not found
		}
		return nil, &PublicationError{Code: code, Message: cr.upstream.redactString(h.redact.String(what + ": " + describeUpstreamError(h.redactorsOf(cr), ue)))}
	case err != nil:
		msg := h.describeCallError(ctx, op, err)
		return nil, &PublicationError{Code: codeInternalError, Message: h.redact.String(what + ": " + msg)}
	}
	if !json.Valid(out) {
		return nil, &PublicationError{Code: codeInternalError, Message: fmt.Sprintf("%s: adapter %q answered something that is not JSON", what, op.Adapter)}
	}
	return cr.upstream.redactJSON(h.redact.JSON(out)), nil
}

// maxPublicationInputRounds bounds the input-required answers of one read
// the host fulfils for a client on an MCP session (as the mcp adapter
// bounds a call's).
const maxPublicationInputRounds = 10

// publicationInput is what a read of op tells its adapter of its client
// (nothing for an adapter that does not list client_requests, or a read
// whose client cannot answer), with a retry's state opened, and what the
// state it hands the client is bound to (the caller, the publication and
// what is read of it).
func (h *Host) publicationInput(ctx context.Context, op *boundOp, req PublicationRequest, what string) (readInput, []string, *PublicationError) {
	args, _ := json.Marshal(req.Arguments)
	bind := []string{req.WorkspaceID, req.AgentID, string(req.Publication.Kind), req.Publication.Key, req.URI, string(args)}
	desc := op.sup.Description()
	if (req.Ask == nil && !req.InputRequired) || len(req.ClientCapabilities) == 0 || desc == nil || !desc.Capabilities.ClientRequests {
		return readInput{}, bind, nil
	}
	in := readInput{caps: req.ClientCapabilities}
	if req.Input == nil || req.Ask != nil {
		return in, bind, nil
	}
	kind := "prompt"
	if req.Publication.Kind != KindPrompt {
		kind = "resource"
	}
	answer, err := h.openSealedInput(ctx, bind, req.Input, kind) // input.go
	switch {
	case errors.Is(err, errInputKeys):
		return in, bind, &PublicationError{Code: codeInternalError, Message: what + ": requestState cannot be checked now (the shared keys are unavailable): retry"}
	case err != nil:
		return in, bind, &PublicationError{Code: codeInvalidParams, Message: err.Error()}
	}
	in.answer = answer
	return in, bind, nil
}

// askInput asks the client of req (on its MCP session) each input request
// of an upstream's input-required answer (the inputRequests object, its
// params redacted): the inputResponses object of its answers, or the
// error of one it refused or could not answer.
func (h *Host) askInput(ctx context.Context, req PublicationRequest, cr CallRequest, requests json.RawMessage, what string) (json.RawMessage, *PublicationError) {
	var asked map[string]struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(requests, &asked); err != nil || len(asked) == 0 {
		return nil, &PublicationError{Code: codeInternalError, Message: what + ": the upstream's input-required answer has no input requests that can be read"}
	}
	responses := map[string]json.RawMessage{}
	for id, q := range asked {
		res, err := req.Ask(ctx, q.Method, h.redactLogData(cr, q.Params))
		if err != nil {
			var ce *ClientError
			if errors.As(err, &ce) {
				err = errors.New(ce.Message)
			}
			return nil, &PublicationError{Code: codeInternalError,
				Message: h.redact.String(fmt.Sprintf("%s: the client did not answer the upstream's input request %q (%s): %v", what, id, q.Method, err))}
		}
		responses[id] = res
	}
	b, _ := json.Marshal(responses)
	return b, nil
}
