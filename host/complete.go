package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/yosida95/uritemplate/v3"

	"github.com/crankmcp/crank/plugins/sdk"
)

// Completions and subscriptions of publications.
//
// An entry whose adapter says its prompts and resource templates
// complete (sdk.Published.Completions: an MCP upstream that offers
// completion/complete) has them complete through Complete, a read like
// the others: the publishing entry's adapter, bounded by the entry's
// timeout, redacted. One whose resources can be subscribed to
// (Published.Subscribe) has them watched through WatchResource: one
// adapter call for as long as the caller keeps it, the updates handed to
// the caller's function.

// CodeMethodNotFound is the JSON-RPC error of a completion or
// subscription that no publication offers.
const CodeMethodNotFound = -32601

// Completions reports whether a publication of the host completes its
// arguments; Subscriptions whether one can be subscribed to.
func (h *Host) Completions() bool {
	for _, p := range h.Publications() {
		if p.Completes {
			return true
		}
	}
	return false
}

func (h *Host) Subscriptions() bool {
	for _, p := range h.Publications() {
		if p.Subscribes {
			return true
		}
	}
	return false
}

// CompletionRequest is the argument of one completion.
type CompletionRequest struct {
	// Argument is its name, Value what the client typed of it.
	Argument, Value string
	// Arguments are the ones the client already resolved.
	Arguments map[string]string
}

// Complete completes an argument of a prompt or resource template (req's
// publication): the MCP CompleteResult's completion as JSON, redacted.
// Failures are *PublicationError.
func (h *Host) Complete(ctx context.Context, req PublicationRequest, arg CompletionRequest) (json.RawMessage, error) {
	p := req.Publication
	if p == nil || p.Kind == KindResource {
		return nil, &PublicationError{Code: codeInvalidParams, Message: "ref: names no prompt or resource template"}
	}
	if !p.Completes {
		return nil, &PublicationError{Code: CodeMethodNotFound,
			Message: fmt.Sprintf("%s %q does not complete its arguments (its upstream offers no completions)", p.Kind, p.Key)}
	}
	ref := sdk.CompleteRequest{RefType: sdk.RefPrompt, Ref: p.Key, Argument: arg.Argument, Value: arg.Value, Arguments: arg.Arguments}
	if p.Kind == KindResourceTemplate {
		ref.RefType = sdk.RefResource
		req.URI = p.Key // names it in messages
	}
	return h.readPublication(ctx, req, p.Kind == KindPrompt, func(ctx context.Context, c publicationClient, op sdk.Operation, rc sdk.RequestContext, _ readInput) (json.RawMessage, error) {
		r := ref
		r.Context, r.Operation = rc, op
		return c.Complete(ctx, &r)
	})
}

// WatchResource subscribes to the resource at req.URI of req's
// publication (a resource, or a template the URI matches) until ctx ends:
// it returns once the adapter took the subscription, then calls updated
// with each URI the upstream says changed; done receives how the watch
// ended (nil when ctx ended it). Failures to subscribe are
// *PublicationError.
func (h *Host) WatchResource(ctx context.Context, req PublicationRequest, updated func(uri string)) (done <-chan error, err error) {
	p := req.Publication
	if p == nil || p.Kind == KindPrompt {
		return nil, &PublicationError{Code: codeInvalidParams, Message: "uri: names no resource"}
	}
	what := fmt.Sprintf("resource %q", req.URI)
	if !p.Subscribes {
		return nil, &PublicationError{Code: CodeMethodNotFound, Message: what + " cannot be subscribed to (its upstream offers no subscriptions)"}
	}
	op := p.op
	c, cr, rc, perr := h.publicationClient(ctx, op, &req, what) // published.go
	if perr != nil {
		return nil, perr
	}
	done, err = c.WatchResource(ctx, &sdk.ResourceRequest{Context: rc, Operation: cr.upstream.operation(op.call), URI: req.URI}, updated)
	var ue *sdk.UpstreamError
	switch {
	case errors.As(err, &ue):
		return nil, &PublicationError{Code: codeInternalError, Message: cr.upstream.redactString(h.redact.String(what + ": " + describeUpstreamError(h.redactorsOf(cr), ue)))}
	case err != nil:
		return nil, &PublicationError{Code: codeInternalError, Message: h.redact.String(what + ": " + h.describeCallError(ctx, op, err))}
	}
	return done, nil
}

// ResourceOf is the publication a URI is read through: the resource of
// that URI, else the first resource template (in load order) that
// matches it.
func (h *Host) ResourceOf(uri string) (*Publication, bool) {
	if p, ok := h.Publication(KindResource, uri); ok {
		return p, true
	}
	for _, p := range h.Publications() {
		if p.Kind != KindResourceTemplate {
			continue
		}
		if t, err := uritemplate.New(p.Key); err == nil && t.Regexp().MatchString(uri) {
			return p, true
		}
	}
	return nil, false
}
