package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The discovery meta-tools take no more than an agent ever sends: a
// search query of at most 1024 characters and 32 terms, tool names of at
// most 128 characters. Past a limit the answer is an isError naming it
// (not a search over it), and the input schemas say so.
func TestDiscoveryInputBounds(t *testing.T) {
	t.Parallel()
	hst := viewHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	url := viewEndpoint(t, hst, &ViewConfig{Discovery: DiscoveryOnly, Toolsets: map[string][]string{"logs": {"*logs*"}}}, nil)
	cs := connectAgent(t, ctx, url, "agent", nil)

	words := func(n int) string {
		w := make([]string, n)
		for i := range w {
			w[i] = fmt.Sprintf("log%d", i)
		}
		return strings.Join(w, " ")
	}
	for _, c := range []struct {
		tool string
		args map[string]any
		want string // "" for a result that is no error
	}{
		{searchToolName, map[string]any{"query": strings.Repeat("x", 1024)}, ""},
		{searchToolName, map[string]any{"query": strings.Repeat("é", 1024)}, ""},
		{searchToolName, map[string]any{"query": strings.Repeat("x", 1025)}, "query: at most 1024 characters"},
		{searchToolName, map[string]any{"query": strings.Repeat("logs ", 4<<10)}, "query: at most 1024 characters"},
		{searchToolName, map[string]any{"query": words(32)}, ""},
		{searchToolName, map[string]any{"query": words(32) + " the of a"}, ""}, // stop words are no terms
		{searchToolName, map[string]any{"query": words(33)}, "query: at most 32 terms"},
		{searchToolName, map[string]any{"query": "", "toolsets": []string{strings.Repeat("l", 129)}}, "toolsets: a toolset name has at most 128 characters"},
		{describeToolName, map[string]any{"name": strings.Repeat("n", 129)}, "name: at most 128 characters"},
		{callToolName, map[string]any{"name": strings.Repeat("n", 1<<20)}, "name: at most 128 characters"},
	} {
		res := callText(t, ctx, cs, c.tool, c.args)
		text := resultText(res)
		switch {
		case c.want == "" && res.IsError:
			t.Errorf("%s %.60v: %s, want a result", c.tool, c.args, text)
		case c.want != "" && (!res.IsError || !strings.Contains(text, c.want)):
			t.Errorf("%s %.60v: %.200s, want an error with %q", c.tool, c.args, text, c.want)
		case len(text) > 1024:
			t.Errorf("%s %.60v: the answer echoes the input (%d bytes)", c.tool, c.args, len(text))
		}
	}

	// The published schemas carry the limits.
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	type prop struct {
		MaxLength *int  `json:"maxLength"`
		Items     *prop `json:"items"`
	}
	schemas := map[string]map[string]prop{}
	for _, tool := range tools.Tools {
		var s struct {
			Properties map[string]prop `json:"properties"`
		}
		b, _ := json.Marshal(tool.InputSchema)
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s: %v", tool.Name, err)
		}
		schemas[tool.Name] = s.Properties
	}
	maxLength := func(p *prop) int {
		if p == nil || p.MaxLength == nil {
			return 0
		}
		return *p.MaxLength
	}
	for _, c := range []struct {
		tool, field string
		got, want   int
	}{
		{searchToolName, "query", maxLength(ptr(schemas[searchToolName]["query"])), 1024},
		{searchToolName, "toolsets.items", maxLength(schemas[searchToolName]["toolsets"].Items), 128},
		{describeToolName, "name", maxLength(ptr(schemas[describeToolName]["name"])), 128},
		{callToolName, "name", maxLength(ptr(schemas[callToolName]["name"])), 128},
	} {
		if c.got != c.want {
			t.Errorf("%s input schema: %s maxLength %d, want %d", c.tool, c.field, c.got, c.want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// BenchmarkSearchLargestQuery: the largest query search_tools accepts (32
// terms in 1024 characters) over 1000 tools.
func BenchmarkSearchLargestQuery(b *testing.B) {
	docs := make([]*searchDoc, 1000)
	for i := range docs {
		name := fmt.Sprintf("tool_%d_users", i)
		docs[i] = newSearchDoc(&viewTool{name: name, tool: &mcp.Tool{Name: name, Title: "List users of group " + fmt.Sprint(i),
			Description: strings.Repeat("Lists the users of one group, with their roles and the date they joined. ", 4),
			InputSchema: json.RawMessage(`{"type":"object","properties":{"group":{"type":"string","description":"The group's id."},"limit":{"type":"integer"}}}`)}})
	}
	w := make([]string, maxSearchTerms)
	for i := range w {
		w[i] = fmt.Sprintf("group%d", i)
	}
	q := strings.Join(w, " ")
	q += strings.Repeat(" ", maxSearchQueryChars-len(q))
	if _, err := queryTerms(q); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		rank(docs, terms(q))
	}
}
