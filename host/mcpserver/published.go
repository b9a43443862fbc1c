package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/auth"
)

// Resources, resource templates and prompts the active host's entries
// publish (host.Publication: an MCP upstream's, when its entry asks for
// them) are the endpoint's own: published with the tools (the SDK then
// advertises the resources and prompts capabilities and sends
// notifications/resources/list_changed and prompts/list_changed when
// they change), read and rendered through the host. The policy governs
// them as it governs tools, with tool.mode "resource",
// "resource_template" or "prompt", tool.name their name and args a
// prompt's arguments or a read's {"uri": ...}: a hidden one is left out
// of its list and answered as one that does not exist, a refused read or
// rendering gets an error naming the rule. Completions and subscriptions
// are offered where an upstream offers them (complete.go).

// published is what the endpoint has published of a host's publications.
type published struct {
	resources, templates, prompts []string
}

// publishPublicationsLocked publishes the publications of h, the active
// host, and removes the ones it no longer has.
func (ep *Endpoint) publishPublicationsLocked(h *host.Host) {
	var now published
	for _, p := range h.Publications() {
		switch p.Kind {
		case host.KindResource:
			var r mcp.Resource
			if json.Unmarshal(p.Definition, &r) != nil {
				continue // the host checked it
			}
			ep.server.AddResource(&r, ep.readResource(p.Kind, p.Key))
			now.resources = append(now.resources, p.Key)
		case host.KindResourceTemplate:
			var t mcp.ResourceTemplate
			if json.Unmarshal(p.Definition, &t) != nil {
				continue
			}
			ep.server.AddResourceTemplate(&t, ep.readResource(p.Kind, p.Key))
			now.templates = append(now.templates, p.Key)
		case host.KindPrompt:
			var pr mcp.Prompt
			if json.Unmarshal(p.Definition, &pr) != nil {
				continue
			}
			ep.server.AddPrompt(&pr, ep.getPrompt(p.Key))
			now.prompts = append(now.prompts, p.Key)
		}
	}
	if stale := gone(ep.published.resources, now.resources); len(stale) > 0 {
		ep.server.RemoveResources(stale...)
	}
	if stale := gone(ep.published.templates, now.templates); len(stale) > 0 {
		ep.server.RemoveResourceTemplates(stale...)
	}
	if stale := gone(ep.published.prompts, now.prompts); len(stale) > 0 {
		ep.server.RemovePrompts(stale...)
	}
	ep.published = now
}

// gone lists what was in had and is not in has.
func gone(had, has []string) []string {
	var out []string
	for _, k := range had {
		if !slices.Contains(has, k) {
			out = append(out, k)
		}
	}
	return out
}

// readResource reads a resource or a URI a template matched.
func (ep *Endpoint) readResource(kind host.PublicationKind, key string) mcp.ResourceHandler {
	return func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		p := planOf(ctx)
		uri := req.Params.URI
		args, _ := json.Marshal(map[string]string{"uri": uri})
		pr, err := ep.publicationRequest(p, kind, key, uri, args)
		if err != nil {
			return nil, err
		}
		relayPublicationInput(req.Session, req.Extra, req.Params.GetMeta(), req.Params.RequestState, req.Params.InputResponses, &pr) // clientrequests.go
		raw, err := p.h.ReadResource(ctx, pr)
		if in := (*host.PublicationInput)(nil); errors.As(err, &in) {
			m, err := inputRequests(in.Requests)
			if err != nil {
				return nil, err
			}
			return &mcp.ReadResourceResult{InputRequests: m, RequestState: in.RequestState}, nil
		}
		if err != nil {
			return nil, publicationError(err)
		}
		res, err := readResult(raw) // results.go
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("resource %q: the adapter's contents are not MCP resource contents: %v", uri, err)}
		}
		return res, nil
	}
}

// getPrompt renders a prompt.
func (ep *Endpoint) getPrompt(name string) mcp.PromptHandler {
	return func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		p := planOf(ctx)
		args, _ := json.Marshal(req.Params.Arguments)
		if req.Params.Arguments == nil {
			args = []byte("{}")
		}
		pr, err := ep.publicationRequest(p, host.KindPrompt, name, "", args)
		if err != nil {
			return nil, err
		}
		pr.Arguments = req.Params.Arguments
		relayPublicationInput(req.Session, req.Extra, req.Params.GetMeta(), req.Params.RequestState, req.Params.InputResponses, &pr) // clientrequests.go
		raw, err := p.h.GetPrompt(ctx, pr)
		if in := (*host.PublicationInput)(nil); errors.As(err, &in) {
			m, err := inputRequests(in.Requests)
			if err != nil {
				return nil, err
			}
			return &mcp.GetPromptResult{InputRequests: m, RequestState: in.RequestState}, nil
		}
		if err != nil {
			return nil, publicationError(err)
		}
		var res mcp.GetPromptResult
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("prompt %q: the adapter's answer is not an MCP prompt result: %v", name, err)}
		}
		return &res, nil
	}
}

// publicationRequest is the host request of a read of uri or a rendering
// (args are what the policy sees of it) by p's caller: the publication of
// kind and key on p's host; or, for one the host does not have or the
// policy hides from the caller, the error of one that does not exist,
// and for refused arguments an error naming the rule.
func (ep *Endpoint) publicationRequest(p *plan, kind host.PublicationKind, key, uri string, args json.RawMessage) (host.PublicationRequest, error) {
	pr := host.PublicationRequest{URI: uri, WorkspaceID: p.scope.WorkspaceID, AgentID: p.scope.AgentID,
		SubjectToken: p.token, TraceParent: p.traceParent, TraceState: p.traceState}
	if p.h != nil {
		pr.Publication, _ = p.h.Publication(kind, key)
	}
	if pr.Publication == nil {
		return pr, publicationNotFound(kind, key, uri)
	}
	return pr, ep.publicationPolicy(p, pr.Publication, uri, args)
}

// publicationNotFound is the error of a resource or prompt that does not
// exist.
func publicationNotFound(kind host.PublicationKind, key, uri string) error {
	if kind == host.KindPrompt {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown prompt %q", key)}
	}
	return mcp.ResourceNotFoundError(uri)
}

// publicationError is the JSON-RPC error of a failed read or rendering.
func publicationError(err error) error {
	var pe *host.PublicationError
	if errors.As(err, &pe) {
		return &jsonrpc.Error{Code: pe.Code, Message: pe.Message, Data: pe.Data}
	}
	return err
}

// policyPublication is a publication as the policy sees it: read-only.
func policyPublication(p *host.Publication) *auth.Tool {
	return &auth.Tool{Name: p.Name, Title: p.Title, Mode: string(p.Kind), Adapter: p.Adapter,
		Annotations: auth.ToolAnnotations{ReadOnly: true, Idempotent: true, OpenWorld: true}}
}

// publicationPolicy is the policy's decision on one read of uri or
// rendering of pub: nil to go on; for one the caller may not see, the
// error of one that does not exist; for refused arguments, an error
// naming the rule.
func (ep *Endpoint) publicationPolicy(p *plan, pub *host.Publication, uri string, args json.RawMessage) error {
	if ep.policy == nil {
		return nil
	}
	kind, c := pub.Kind, p.caller
	switch d, ref := ep.policy.Check(c, policyPublication(pub), args); d {
	case auth.Hidden:
		ep.logger.Info("read denied by policy: hidden from the caller", zap.String("kind", string(kind)),
			zap.String("name", pub.Name), zap.String("agent", c.ID))
		return publicationNotFound(kind, pub.Key, uri)
	case auth.Refused:
		ep.logger.Info("read denied by policy", zap.String("kind", string(kind)), zap.String("name", pub.Name),
			zap.String("agent", c.ID), zap.String("rule", ref.Rule), zap.String("reason", ref.Reason))
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s %q: %s", kind, pub.Name, ref.Error())}
	}
	return nil
}

// filterPublications leaves out of a resources, resource templates or
// prompts list the ones the caller of p may not see.
func (ep *Endpoint) filterPublications(p *plan, res mcp.Result) {
	visible := func(kind host.PublicationKind, key string) bool {
		pub, ok := p.h.Publication(kind, key)
		return ok && ep.policy.Visible(p.caller, policyPublication(pub))
	}
	switch r := res.(type) {
	case *mcp.ListResourcesResult:
		r.Resources = slices.DeleteFunc(r.Resources, func(x *mcp.Resource) bool { return !visible(host.KindResource, x.URI) })
	case *mcp.ListResourceTemplatesResult:
		r.ResourceTemplates = slices.DeleteFunc(r.ResourceTemplates, func(x *mcp.ResourceTemplate) bool {
			return !visible(host.KindResourceTemplate, x.URITemplate)
		})
	case *mcp.ListPromptsResult:
		r.Prompts = slices.DeleteFunc(r.Prompts, func(x *mcp.Prompt) bool { return !visible(host.KindPrompt, x.Name) })
	}
}
