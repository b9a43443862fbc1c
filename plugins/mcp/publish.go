package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/plugins/sdk"
)

// Resources and prompts.
//
// An entry with resources publishes the upstream's resources and resource
// templates, one with prompts its prompts (sdk.Publisher): each as the
// upstream's object with prefix before its name. A resource's or
// template's config is the entry's connection fields; a prompt's adds
// prompt, the upstream prompt's name. A read or a rendering is one
// resources/read or prompts/get on the shared upstream session.

var _ sdk.Publisher = (*adapter)(nil)

// checkPublishing reports the config fields of publishing that do not go
// with the others.
func checkPublishing(c *config, d *sdk.Diagnostics) {
	const one = "cannot be set with tool: an entry for one upstream tool publishes nothing else"
	if c.Tool != "" && c.Resources {
		d.Errorf("resources", one)
	}
	if c.Tool != "" && c.Prompts {
		d.Errorf("prompts", one)
	}
	if c.Prompt != "" && (c.Tool != "" || c.Resources || c.Prompts || c.Prefix != "" ||
		len(c.Include) > 0 || len(c.Exclude) > 0 || len(c.Rename) > 0) {
		d.Errorf("prompt", "names the upstream prompt in the config of a prompt the adapter publishes: tool, resources, prompts, prefix, include, exclude and rename do not apply")
	}
}

// publishes reports whether the entry publishes resources or prompts.
func (u *upstream) publishes() bool { return u.resources || u.prompts }

// lists is what the entry publishes, for the watch.
func (u *upstream) lists() lists {
	var l lists
	if u.resources {
		l |= listResources
	}
	if u.prompts {
		l |= listPrompts
	}
	return l
}

// published names what the entry publishes, for messages.
func (u *upstream) published() string {
	switch {
	case u.resources && u.prompts:
		return "resources and prompts"
	case u.resources:
		return "resources"
	}
	return "prompts"
}

// capability is a server capability the adapter uses.
type capability int

const (
	capTools capability = iota
	capResources
	capPrompts
)

// has reports whether the upstream of s declared the capability c.
func has(s *gomcp.ClientSession, c capability) bool {
	ir := s.InitializeResult()
	if ir == nil || ir.Capabilities == nil {
		return false
	}
	switch c {
	case capTools:
		return ir.Capabilities.Tools != nil
	case capResources:
		return ir.Capabilities.Resources != nil
	}
	return ir.Capabilities.Prompts != nil
}

// methodNotFound reports whether err is the upstream's "method not found".
func methodNotFound(err error) bool {
	var rpc *jsonrpc.Error
	return errors.As(err, &rpc) && rpc.Code == jsonrpc.CodeMethodNotFound
}

// lacks reports whether err is the upstream's "method not found" for a
// list of the capability c, which it did not declare: it has none.
func lacks(s *gomcp.ClientSession, err error, c capability) bool {
	return methodNotFound(err) && !has(s, c)
}

// offers reports whether the upstream declared the capability of
// something the entry publishes.
func (a *adapter) offers(ctx context.Context, u *upstream) bool {
	ok := false
	_ = a.withSession(ctx, u, true, func(s *gomcp.ClientSession) error {
		ok = u.resources && has(s, capResources) || u.prompts && has(s, capPrompts)
		return nil
	})
	return ok
}

// withTimeout bounds ctx by the operation's timeout, when it has one.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d > 0 {
		return context.WithTimeout(ctx, d)
	}
	return context.WithCancel(ctx)
}

// listing is what an upstream lists of what an entry publishes.
type listing struct {
	resources []*gomcp.Resource
	templates []*gomcp.ResourceTemplate
	prompts   []*gomcp.Prompt
	// missing are the config fields whose capability the upstream lacks.
	missing []string
}

// collect reads every page of a list.
func collect[T any](seq iter.Seq2[T, error]) ([]T, error) {
	var all []T
	for x, err := range seq {
		if err != nil {
			return nil, err
		}
		all = append(all, x)
	}
	return all, nil
}

// list lists what u publishes on the session s.
func (l *listing) list(ctx context.Context, s *gomcp.ClientSession, u *upstream) error {
	var err error
	if u.resources && !has(s, capResources) {
		l.missing = append(l.missing, "resources")
	} else if u.resources {
		if l.resources, err = collect(s.Resources(ctx, nil)); err != nil {
			return err
		}
		// An upstream may serve resources and no templates.
		if l.templates, err = collect(s.ResourceTemplates(ctx, nil)); err != nil && !methodNotFound(err) {
			return err
		}
	}
	if u.prompts && !has(s, capPrompts) {
		l.missing = append(l.missing, "prompts")
	} else if u.prompts {
		if l.prompts, err = collect(s.Prompts(ctx, nil)); err != nil {
			return err
		}
	}
	return nil
}

// Publish implements sdk.Publisher: the upstream's resources and resource
// templates when the entry has resources, its prompts when it has
// prompts, named with prefix.
func (a *adapter) Publish(ctx context.Context, op *sdk.Operation) (pub *sdk.Published, diags []sdk.Diagnostic) {
	p := a.configs.Get(op)
	if p.Err() != nil {
		return nil, nil // ExpandOperation reports the config's diagnostics
	}
	u := p.Value
	a.pool.watch.publishing(u.key, op.Name, u.lists()) // watch.go
	if !u.publishes() {
		return nil, nil
	}
	ctx, cancel := withTimeout(ctx, op.Timeout)
	defer cancel()
	var l listing
	var completions, subscribe bool
	err := a.withSession(ctx, u, true, func(s *gomcp.ClientSession) error {
		l = listing{}
		completions, subscribe = offersCompletions(s), offersSubscribe(s) // complete.go
		return l.list(ctx, s, u)
	})
	if err != nil {
		return nil, []sdk.Diagnostic{sdk.Errorf(u.connField(), "listing the %s of %s failed: %s", u.published(), u.label, a.failure(ctx, u, err).Message)}
	}
	var d sdk.Diagnostics
	for _, f := range l.missing {
		d.Warnf(f, "%s offers no %s (it does not have the capability)", u.label, f)
	}
	pub = &sdk.Published{}
	resourceConfig, err := u.derivedConfig("", "", nil)
	if err != nil {
		return nil, []sdk.Diagnostic{sdk.Errorf("", "%v", err)}
	}
	same := func(string) (json.RawMessage, error) { return resourceConfig, nil }
	pub.Resources = publications(u, "resource", l.resources, func(r *gomcp.Resource) *string { return &r.Name }, same, &d)
	pub.ResourceTemplates = publications(u, "resource template", l.templates, func(r *gomcp.ResourceTemplate) *string { return &r.Name }, same, &d)
	pub.Prompts = publications(u, "prompt", l.prompts, func(p *gomcp.Prompt) *string { return &p.Name },
		func(name string) (json.RawMessage, error) { return u.derivedConfig("prompt", name, nil) }, &d)
	if d.Failed() {
		return nil, d.List()
	}
	pub.Completions = completions && len(pub.Prompts)+len(pub.ResourceTemplates) > 0
	pub.Subscribe = subscribe && len(pub.Resources)+len(pub.ResourceTemplates) > 0
	return pub, d.List()
}

// publications makes the upstream's objects publications: each object
// with prefix before its name, and the config config returns for its
// upstream name.
func publications[T any](u *upstream, kind string, list []*T, name func(*T) *string, config func(string) (json.RawMessage, error), d *sdk.Diagnostics) []sdk.Publication {
	var out []sdk.Publication
	for _, x := range list {
		if x == nil {
			continue
		}
		c := *x
		n := name(&c)
		upstreamName := *n
		*n = u.prefix + upstreamName
		def, err := json.Marshal(&c)
		if err != nil {
			d.Errorf("", "%s %q of %s: %v", kind, upstreamName, u.label, err)
			continue
		}
		cfg, err := config(upstreamName)
		if err != nil {
			d.Errorf("", "%s %q of %s: %v", kind, upstreamName, u.label, err)
			continue
		}
		out = append(out, sdk.Publication{Definition: def, Config: cfg})
	}
	return out
}

// ReadResource implements sdk.Publisher: one resources/read on the
// upstream, answering its contents.
func (a *adapter) ReadResource(ctx context.Context, req *sdk.ResourceRequest) (json.RawMessage, error) {
	u, err := a.upstreamOf(&req.Operation)
	if err != nil {
		return nil, err
	}
	params := &gomcp.ReadResourceParams{URI: req.URI}
	k, err := readInput(ctx, u, req.Input, &params.InputResponses, &params.RequestState) // ask.go
	if err != nil {
		return nil, err
	}
	var ir *sdk.InputRequired
	out, err := a.ask(ctx, u, req.Operation.Timeout, "the resource's contents", func(ctx context.Context, s *gomcp.ClientSession) (any, error) {
		res, err := s.ReadResource(k.context(ctx, s, params), params)
		if err != nil {
			return nil, err
		}
		if ir, err = k.inputRequired(u, res.NeedsInput(), res.InputRequests, res.RequestState); ir != nil || err != nil {
			return nil, err
		}
		if res.Contents == nil {
			res.Contents = []*gomcp.ResourceContents{}
		}
		if ir := s.InitializeResult(); ir != nil && ir.ProtocolVersion >= cachingProtocol && res.CacheScope != "" {
			// The upstream's caching hints, which the gateway passes on.
			return map[string]any{"contents": res.Contents, "ttlMs": res.TTLMs, "cacheScope": res.CacheScope}, nil
		}
		return res.Contents, nil
	})
	if ir != nil {
		return nil, ir // for the client to answer (the host seals the state)
	}
	return out, err
}

// cachingProtocol is the first protocol whose resources/read results
// carry caching hints (ttlMs, cacheScope): go-sdk's servers send them on
// earlier ones too, where they mean nothing.
const cachingProtocol = "2026-07-28"

// GetPrompt implements sdk.Publisher: one prompts/get of the upstream
// prompt the config names, answering its result.
func (a *adapter) GetPrompt(ctx context.Context, req *sdk.PromptRequest) (json.RawMessage, error) {
	u, err := a.upstreamOf(&req.Operation)
	if err != nil {
		return nil, err
	}
	if u.prompt == "" {
		return nil, &sdk.UpstreamError{Kind: sdk.KindInvalidArgument, Upstream: u.label,
			Message: "config.prompt: no upstream prompt named: the config of a published prompt names it"}
	}
	params := &gomcp.GetPromptParams{Name: u.prompt, Arguments: req.Arguments}
	k, err := readInput(ctx, u, req.Input, &params.InputResponses, &params.RequestState) // ask.go
	if err != nil {
		return nil, err
	}
	var ir *sdk.InputRequired
	out, err := a.ask(ctx, u, req.Operation.Timeout, "the prompt's result", func(ctx context.Context, s *gomcp.ClientSession) (any, error) {
		res, err := s.GetPrompt(k.context(ctx, s, params), params)
		if err != nil {
			return nil, err
		}
		if ir, err = k.inputRequired(u, res.NeedsInput(), res.InputRequests, res.RequestState); ir != nil || err != nil {
			return nil, err
		}
		// The result's _meta is the upstream's to the adapter (its
		// serverInfo, say), not for the gateway's clients.
		res.Meta = nil
		return res, nil
	})
	if ir != nil {
		return nil, ir
	}
	return out, err
}

// ask sends one request that is safe to repeat on the upstream's session
// (send) and encodes what it answers; failures are classified as a call's.
func (a *adapter) ask(ctx context.Context, u *upstream, timeout time.Duration, what string, send func(context.Context, *gomcp.ClientSession) (any, error)) (json.RawMessage, error) {
	ctx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	var out any
	err := a.withSession(ctx, u, true, func(s *gomcp.ClientSession) error {
		var err error
		out, err = send(ctx, s)
		return err
	})
	if err != nil {
		return nil, a.failure(ctx, u, err)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, &sdk.UpstreamError{Kind: sdk.KindBadResponse, Upstream: u.label, Message: what + " cannot be encoded as JSON"}
	}
	return b, nil
}
