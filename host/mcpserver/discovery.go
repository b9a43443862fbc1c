package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/opsfile"
)

// Discovery mode (ViewConfig.Discovery): three meta-tools let an agent
// load only the tools it needs from a large catalog.
//
//   - search_tools ranks the view's tools by a text query over their
//     names, titles, descriptions, toolsets and argument names;
//   - describe_tool returns one tool's full definition (input and output
//     schemas, annotations, mode, family);
//   - call_tool calls one tool by name, with its arguments, as a direct
//     tools/call would: same policy decision, same progress
//     notifications for a window, same family tools.
//
// They see exactly what the caller may see: the view's tools that the
// policy shows the caller. A tool hidden from the caller is not found,
// not described and not called (the answer is the one for a tool that
// does not exist).

const (
	searchToolName   = "search_tools"
	describeToolName = "describe_tool"
	callToolName     = "call_tool"
)

// Search bounds. The input bounds are far beyond what an agent sends (a
// few words, a published name) and keep a call's cost small whoever sends
// it: the ranking costs the query's terms times the view's tools.
const (
	defaultSearchLimit  = 10
	maxSearchLimit      = 50
	maxSearchQueryChars = 1024 // characters of a search query
	maxSearchTerms      = 32   // terms of a search query, stop words left out
	maxToolNameChars    = 128  // a tool or toolset name, as a view publishes it
	searchSnippet       = 240  // characters of a description in a search hit
)

func metaTools() []*mcp.Tool {
	return []*mcp.Tool{{
		Name:  searchToolName,
		Title: "Search the available tools",
		Description: "Find tools of this server for a task. Returns the best matches, best first, with name, title, " +
			"a short description and mode. The server has more tools than it lists: search before concluding no tool fits. " +
			"Then call describe_tool for the full input schema of a match, and call_tool to run it.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"query":{"type":"string","maxLength":1024,"description":"What you want to do or find, in a few words (e.g. \"recent errors in the logs\", \"delete a user\"). Empty lists every tool of the given toolsets."},` +
			`"toolsets":{"type":"array","items":{"type":"string","maxLength":128},"description":"Only tools of these toolsets (tags); search results name each tool's toolsets."},` +
			`"limit":{"type":"integer","minimum":1,"maximum":50,"default":10,"description":"How many matches to return at most."}` +
			`},"required":["query"],"additionalProperties":false}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"tools":{"type":"array","items":{"type":"object","properties":{` +
			`"name":{"type":"string"},"title":{"type":"string"},"description":{"type":"string"},` +
			`"mode":{"type":"string","enum":["unary","window","session","async_job"]},` +
			`"toolsets":{"type":"array","items":{"type":"string"}},"score":{"type":"number"}},"required":["name","mode","score"]}},` +
			`"total":{"type":"integer","description":"How many tools matched in all."}},"required":["tools","total"]}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: boolPtr(false)},
	}, {
		Name:  describeToolName,
		Title: "Describe a tool",
		Description: "The full definition of one tool found with search_tools: its description, the JSON Schema of its " +
			"arguments (input_schema) and of its structured result (output_schema), its annotations, its mode " +
			"(unary: one call, one result; window: collects a stream for a while and reports progress; session and " +
			"async_job: a family of tools, start then poll/status/result, stop/cancel) and, for a family, its tools by role.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"name":{"type":"string","maxLength":128,"description":"The tool's name, as search_tools returned it."}` +
			`},"required":["name"],"additionalProperties":false}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"name":{"type":"string"},"title":{"type":"string"},"description":{"type":"string"},` +
			`"mode":{"type":"string","enum":["unary","window","session","async_job"]},` +
			`"role":{"type":"string","description":"The tool's role in its family (start, poll, stop, status, result, cancel)."},` +
			`"family":{"type":"object","additionalProperties":{"type":"string"},"description":"The family's tools by role."},` +
			`"input_schema":{"type":"object"},"output_schema":{"type":"object"},"annotations":{"type":"object"},` +
			`"toolsets":{"type":"array","items":{"type":"string"}},"execution":{"type":"object"}},"required":["name","mode","input_schema"]}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: boolPtr(false)},
	}, {
		Name:  callToolName,
		Title: "Call a tool",
		Description: "Call one tool of this server by name, with arguments matching its input_schema (see describe_tool). " +
			"Returns the tool's own result. A window tool reports progress while it collects; a session or async_job " +
			"tool returns an id to pass to the family's other tools, also called through call_tool.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"name":{"type":"string","maxLength":128,"description":"The tool's name, as search_tools returned it."},` +
			`"arguments":{"type":"object","description":"The tool's arguments, as its input_schema describes them."}` +
			`},"required":["name"],"additionalProperties":false}`),
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: boolPtr(true)},
	}}
}

// addDiscovery registers the meta-tools.
func (ep *Endpoint) addDiscovery() {
	if ep.view == nil || ep.view.discovery == DiscoveryOff {
		return
	}
	handlers := map[string]mcp.ToolHandler{searchToolName: ep.searchTools, describeToolName: ep.describeTool, callToolName: ep.callMetaTool}
	for _, t := range ep.view.meta {
		ep.server.AddTool(t, handlers[t.Name])
	}
}

// visibleTools tells which tools of p's view the caller may see.
func (ep *Endpoint) visibleTools(p *plan) func(*viewTool) bool {
	if ep.policy == nil {
		return func(*viewTool) bool { return true }
	}
	seen := map[*opsfile.Operation]bool{}
	return func(vt *viewTool) bool {
		v, ok := seen[vt.op]
		if !ok {
			v = ep.policy.Visible(p.caller, policyTool(vt.op))
			seen[vt.op] = v
		}
		return v
	}
}

// toolError is a tool-level error a model reads.
func toolError(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

func structuredResult(v any) (*mcp.CallToolResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: json.RawMessage(b)}, nil
}

// decodeArgs decodes a meta-tool's arguments strictly: no unknown member,
// none given twice (as the host refuses for every tool).
func decodeArgs(raw json.RawMessage, tool string, dst any) *mcp.CallToolResult {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = json.RawMessage(`{}`)
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(dst); err != nil {
		return toolError("%s: invalid arguments: %v", tool, err)
	}
	if msg := host.DuplicateMember(raw); msg != "" {
		return toolError("%s: invalid arguments: %s", tool, msg)
	}
	return nil
}

type searchHit struct {
	Name        string   `json:"name"`
	Title       string   `json:"title,omitempty"`
	Description string   `json:"description,omitempty"`
	Mode        string   `json:"mode"`
	Toolsets    []string `json:"toolsets,omitempty"`
	Score       float64  `json:"score"`
}

func (ep *Endpoint) searchTools(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Query    *string  `json:"query"`
		Toolsets []string `json:"toolsets"`
		Limit    *int     `json:"limit"`
	}
	if res := decodeArgs(req.Params.Arguments, searchToolName, &in); res != nil {
		return res, nil
	}
	if in.Query == nil {
		return toolError("search_tools: query: required (what you want to do, in a few words)"), nil
	}
	q, err := queryTerms(*in.Query)
	if err != nil {
		return toolError("search_tools: %v", err), nil
	}
	limit := defaultSearchLimit
	if in.Limit != nil {
		if *in.Limit < 1 || *in.Limit > maxSearchLimit {
			return toolError("search_tools: limit: must be from 1 to %d (got %d)", maxSearchLimit, *in.Limit), nil
		}
		limit = *in.Limit
	}
	p := planOf(ctx)
	st, visible := p.view, ep.visibleTools(p)
	if st == nil {
		return toolError("search_tools: the server is not ready"), nil
	}
	toolsets := map[string]bool{}
	for _, ts := range in.Toolsets {
		if len(ts) > maxToolNameChars {
			return toolError("search_tools: toolsets: a toolset name has at most %d characters", maxToolNameChars), nil
		}
		if _, ok := ep.view.toolsets[ts]; !ok {
			return toolError("search_tools: toolsets: unknown toolset %q (toolsets: %s)", ts, strings.Join(sortedKeys(ep.view.toolsets), ", ")), nil
		}
		toolsets[ts] = true
	}
	var docs []*searchDoc
	for _, vt := range st.tools {
		// A family is found by its start tool; describe_tool names the rest.
		if vt.role != "" && vt.role != opsfile.RoleStart {
			continue
		}
		if len(toolsets) > 0 && !slices.ContainsFunc(vt.toolsets, func(s string) bool { return toolsets[s] }) {
			continue
		}
		if visible(vt) {
			docs = append(docs, st.searchDoc(vt))
		}
	}
	hits := rank(docs, q)
	out := struct {
		Tools []searchHit `json:"tools"`
		Total int         `json:"total"`
	}{Tools: []searchHit{}, Total: len(hits)}
	for _, h := range hits[:min(limit, len(hits))] {
		vt := h.doc.vt
		out.Tools = append(out.Tools, searchHit{Name: vt.name, Title: vt.tool.Title, Description: snippet(sentences(vt.tool.Title, vt.tool.Description)),
			Mode: string(vt.op.Mode), Toolsets: vt.toolsets, Score: math.Round(h.score*100) / 100})
	}
	return structuredResult(out)
}

// queryTerms are the terms of a search query, or the error naming the
// bound it exceeds, found before the query costs anything.
func queryTerms(query string) ([]string, error) {
	if len(query) > maxSearchQueryChars && (len(query) > utf8.UTFMax*maxSearchQueryChars || utf8.RuneCountInString(query) > maxSearchQueryChars) {
		return nil, fmt.Errorf("query: at most %d characters (what you want to do, in a few words)", maxSearchQueryChars)
	}
	q := terms(query)
	if len(q) > maxSearchTerms {
		return nil, fmt.Errorf("query: at most %d terms (got %d; what you want to do, in a few words)", maxSearchTerms, len(q))
	}
	return q, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// snippet is the start of a description, cut at a sentence or word.
func snippet(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= searchSnippet {
		return s
	}
	cut := s[:searchSnippet]
	if i := strings.LastIndex(cut, ". "); i > searchSnippet/2 {
		return cut[:i+1]
	}
	if i := strings.LastIndexByte(cut, ' '); i > 0 {
		cut = cut[:i]
	}
	return strings.ToValidUTF8(cut, "") + "…"
}

// searchDoc is a tool's text, by field, as terms.
type searchDoc struct {
	vt     *viewTool
	fields [][]string // name, title, toolsets and argument names, description
}

// Field weights: a term in the name counts most.
var fieldWeights = []float64{4, 3, 2, 1}

func newSearchDoc(vt *viewTool) *searchDoc {
	var args, argText []string
	var schema struct {
		Properties map[string]struct {
			Description string `json:"description"`
		} `json:"properties"`
	}
	if raw, ok := vt.tool.InputSchema.(json.RawMessage); ok {
		_ = json.Unmarshal(raw, &schema)
	}
	for name, p := range schema.Properties {
		args = append(args, name)
		argText = append(argText, p.Description)
	}
	return &searchDoc{vt: vt, fields: [][]string{
		terms(vt.name),
		terms(vt.tool.Title),
		terms(strings.Join(append(vt.toolsets, args...), " ")),
		terms(vt.tool.Description + " " + strings.Join(argText, " ")),
	}}
}

// searchDoc is vt's search document, made once per view state.
func (st *viewState) searchDoc(vt *viewTool) *searchDoc {
	st.docsOnce.Do(func() {
		st.docs = make(map[*viewTool]*searchDoc, len(st.tools))
		for _, t := range st.tools {
			st.docs[t] = newSearchDoc(t)
		}
	})
	return st.docs[vt]
}

type hit struct {
	doc   *searchDoc
	score float64
}

// rank scores the documents for the query terms: for each term, the
// weight of the best field it appears in (whole, or as a prefix of at
// least 3 characters for half of it), times its rarity across the
// documents. Without terms every document matches.
func rank(docs []*searchDoc, q []string) []hit {
	var out []hit
	if len(q) == 0 {
		for _, d := range docs {
			out = append(out, hit{doc: d})
		}
		sort.SliceStable(out, func(i, j int) bool { return out[i].doc.vt.name < out[j].doc.vt.name })
		return out
	}
	// weights[i*len(q)+j] is term j's weight in document i, worked out once.
	weights := make([]float64, len(docs)*len(q))
	df := make([]int, len(q))
	for i, d := range docs {
		for j, t := range q {
			if w, _ := d.weight(t); w > 0 {
				weights[i*len(q)+j] = w
				df[j]++
			}
		}
	}
	for i, d := range docs {
		s := 0.0
		for j := range q {
			if w := weights[i*len(q)+j]; w > 0 {
				s += w * math.Log(1+float64(len(docs))/float64(df[j]))
			}
		}
		if s > 0 {
			out = append(out, hit{doc: d, score: s})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].score != out[j].score {
			return out[i].score > out[j].score
		}
		if a, b := harm(out[i].doc.vt.tool), harm(out[j].doc.vt.tool); a != b {
			return a < b
		}
		return out[i].doc.vt.name < out[j].doc.vt.name
	})
	return out
}

// harm orders equally good matches: read-only tools first, then those
// that say they destroy nothing, then the rest (MCP's default is
// destructive), so a lookup comes before a delete.
func harm(t *mcp.Tool) int {
	switch a := t.Annotations; {
	case a == nil:
		return 2
	case a.ReadOnlyHint:
		return 0
	case a.DestructiveHint != nil && !*a.DestructiveHint:
		return 1
	}
	return 2
}

// sentences joins a tool's title and description as sentences: each
// line ends in punctuation (a period where it has none), and a title the
// description already starts with is not repeated.
func sentences(title, description string) string {
	var parts []string
	if t := strings.TrimSpace(title); t != "" && !strings.HasPrefix(strings.TrimSpace(description), t) {
		parts = append(parts, t)
	}
	parts = append(parts, strings.Split(description, "\n")...)
	var b strings.Builder
	for _, p := range parts {
		p = strings.Join(strings.Fields(p), " ")
		if p == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(p)
		if !strings.ContainsRune(".!?:;…", rune(p[len(p)-1])) && !strings.HasSuffix(p, "…") {
			b.WriteByte('.')
		}
	}
	return b.String()
}

func (d *searchDoc) weight(t string) (float64, bool) {
	best := 0.0
	for i, f := range d.fields {
		for _, w := range f {
			switch {
			case w == t:
				best = max(best, fieldWeights[i])
			case len(t) >= 3 && (strings.HasPrefix(w, t) || strings.HasPrefix(t, w) && len(w) >= 3):
				best = max(best, fieldWeights[i]/2)
			}
		}
	}
	return best, best > 0
}

var stopWords = map[string]bool{"a": true, "an": true, "the": true, "in": true, "of": true, "for": true, "to": true,
	"and": true, "or": true, "on": true, "with": true, "by": true, "from": true, "me": true, "my": true, "i": true,
	"is": true, "are": true, "be": true, "it": true, "its": true, "this": true, "that": true, "at": true, "as": true,
	"all": true, "any": true, "some": true, "what": true, "which": true, "how": true, "do": true, "can": true, "you": true}

// terms splits text into lower-case word stems: at anything but letters
// and digits, and at camelCase boundaries; stop words are left out.
func terms(s string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			if w := stem(string(cur)); !stopWords[w] {
				out = append(out, w)
			}
			cur = cur[:0]
		}
	}
	rs := []rune(s)
	for i, r := range rs {
		switch {
		case unicode.IsUpper(r) && i > 0 && unicode.IsLower(rs[i-1]):
			flush()
			cur = append(cur, unicode.ToLower(r))
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			cur = append(cur, unicode.ToLower(r))
		default:
			flush()
		}
	}
	flush()
	return out
}

// stem strips common English plural and verb endings.
func stem(w string) string {
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		return w[:len(w)-3] + "y"
	case len(w) > 5 && strings.HasSuffix(w, "ing"):
		return w[:len(w)-3]
	case len(w) > 4 && strings.HasSuffix(w, "ed"):
		return w[:len(w)-2]
	case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss"):
		return w[:len(w)-1]
	}
	return w
}

// found is the visible tool of p's view named by a meta-tool's name
// argument, or the error a model reads: the same for a tool hidden from
// the caller as for one that does not exist.
func (ep *Endpoint) found(p *plan, tool, name string) (*viewTool, *mcp.CallToolResult) {
	if name == "" {
		return nil, toolError("%s: name: required (a tool name search_tools returned)", tool)
	}
	if len(name) > maxToolNameChars {
		return nil, toolError("%s: name: at most %d characters (a tool name search_tools returned)", tool, maxToolNameChars)
	}
	if p.view == nil {
		return nil, toolError("%s: the server is not ready", tool)
	}
	vt := p.view.byPublished[name]
	if vt == nil || !ep.visibleTools(p)(vt) {
		return nil, toolError("%s: unknown tool %q: use search_tools to find the tools you can call", tool, name)
	}
	return vt, nil
}

func (ep *Endpoint) describeTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Name string `json:"name"`
	}
	if res := decodeArgs(req.Params.Arguments, describeToolName, &in); res != nil {
		return res, nil
	}
	p := planOf(ctx)
	vt, res := ep.found(p, describeToolName, in.Name)
	if res != nil {
		return res, nil
	}
	t := vt.tool
	out := map[string]any{"name": vt.name, "mode": string(vt.op.Mode), "input_schema": t.InputSchema}
	if t.Title != "" {
		out["title"] = t.Title
	}
	if t.Description != "" {
		out["description"] = t.Description
	}
	if t.OutputSchema != nil {
		out["output_schema"] = t.OutputSchema
	}
	if vt.served.AcceptsTasks() {
		if o, ok := taskOutputSchemas(p.h)[vt.hostName]; ok {
			out["output_schema"] = o
		}
	}
	if t.Annotations != nil {
		out["annotations"] = t.Annotations
	}
	if len(vt.toolsets) > 0 {
		out["toolsets"] = vt.toolsets
	}
	if t.Meta != nil {
		if ex, ok := t.Meta["io.crank/execution"]; ok {
			out["execution"] = ex
		}
	}
	if vt.op.Family != nil {
		out["family"] = p.view.familyNames(vt.op)
		out["role"] = vt.role
	}
	return structuredResult(out)
}

// callMetaTool runs call_tool: the named tool's call, checked by the
// policy as a direct call is, with the progress token of call_tool's own
// request, so a window's progress reaches the caller.
func (ep *Endpoint) callMetaTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if res := decodeArgs(req.Params.Arguments, callToolName, &in); res != nil {
		return res, nil
	}
	if a := bytes.TrimSpace(in.Arguments); len(a) > 0 && a[0] != '{' && string(a) != "null" {
		return toolError("call_tool: arguments: must be an object (the tool's arguments, see describe_tool)"), nil
	}
	p := planOf(ctx)
	vt, res := ep.found(p, callToolName, in.Name)
	if res != nil {
		return res, nil
	}
	call := ep.callOf(p, in.Name, vt, in.Arguments) // plan.go
	switch {
	case call.denied != nil:
		return toolError("call_tool: unknown tool %q: use search_tools to find the tools you can call", in.Name), nil
	case call.refused != nil:
		return call.refused, nil
	}
	if err := ep.admit(&call, req.Extra); err != nil { // ratelimit.go
		return nil, err
	}
	inner := &mcp.CallToolRequest{Session: req.Session, Extra: req.Extra,
		Params: &mcp.CallToolParamsRaw{Meta: req.Params.Meta, Name: vt.hostName, Arguments: in.Arguments}}
	res, err := ep.call(ctx, &call, inner)
	p.view.renameResult(vt, res)
	return res, err
}

func boolPtr(b bool) *bool { return &b }
