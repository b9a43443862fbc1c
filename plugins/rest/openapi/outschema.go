package openapi

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"

	"github.com/crankmcp/crank/plugins/sdk"
)

// Output schemas that scale. A document such as Stripe's links every
// object to every other (expandable fields): written inline, each tool's
// output schema would carry its own copy of the whole graph (hundreds of
// megabytes for the document). Instead:
//
//   - every schema the document writes as a $ref is converted once for the
//     whole document (outputDefs) and published as a definition: a tool's
//     output schema is its root with "$defs" holding only the definitions
//     it reaches, referred to as "#/$defs/Name" (cycles are references,
//     never expansions);
//   - a tool has a byte budget (output_schema_limits.tool_bytes) and the
//     entry one for all its tools (document_bytes), shared out evenly
//     among the tools that need more than their share: a tool takes the
//     definitions it reaches nearest first while they fit, and each one
//     that does not fit is published open ({}: any value), so the schema
//     still accepts every answer the document describes;
//   - a tool whose root alone does not fit publishes no output schema;
//     one warning says how many were trimmed or dropped.

// outputDefs holds the converted definitions of one document.
type outputDefs struct {
	c *schemaConv
	// refs lists, per definition, the definitions its body refers to
	// (sorted); size is its body's JSON size.
	refs map[string][]string
	size map[string]int
}

func newOutputDefs() *outputDefs {
	c := newSchemaConv(false)
	c.allDefs, c.unbounded = true, true
	return &outputDefs{c: c, refs: map[string][]string{}, size: map[string]int{}}
}

// outputPlan is one tool's output schema before its budget is known: its
// root (definitions referred to, not written in) and the definitions it
// reaches, nearest first.
type outputPlan struct {
	root     map[string]any
	rootSize int
	reach    []string
	// need is the size of the whole schema with every definition written.
	need int
}

// plan converts a root built by fn (from od.c.convert calls) and indexes
// the definitions it reaches; nil when fn returns nil.
func (od *outputDefs) plan(fn func(c *schemaConv) map[string]any) *outputPlan {
	root := fn(od.c)
	if root == nil {
		return nil
	}
	p := &outputPlan{root: root}
	b, err := json.Marshal(root)
	if err != nil {
		return nil
	}
	p.rootSize = len(b)
	p.need = p.rootSize
	seen := map[string]bool{}
	queue := defRefs(root, nil)
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if seen[name] {
			continue
		}
		seen[name] = true
		p.reach = append(p.reach, name)
		p.need += od.defSize(name) + len(name) + 4
		queue = append(queue, od.refs[name]...)
	}
	return p
}

// defSize indexes one definition (once): its size and the definitions it
// refers to.
func (od *outputDefs) defSize(name string) int {
	if n, ok := od.size[name]; ok {
		return n
	}
	body := od.c.defs[name]
	b, _ := json.Marshal(body)
	od.size[name] = len(b)
	seen := map[string]bool{}
	var refs []string
	for _, r := range defRefs(body, nil) {
		if !seen[r] {
			seen[r] = true
			refs = append(refs, r)
		}
	}
	sort.Strings(refs)
	od.refs[name] = refs
	return len(b)
}

// defRefs appends the definitions a converted schema refers to, in
// document order (properties sorted), not looking into the definitions.
func defRefs(v any, out []string) []string {
	switch t := v.(type) {
	case map[string]any:
		if r, ok := t["$ref"].(string); ok {
			if name, ok := strings.CutPrefix(r, "#/$defs/"); ok {
				out = append(out, name)
			}
		}
		keys := make([]string, 0, len(t))
		for k := range t {
			if k != "$defs" && k != "enum" && k != "const" && k != "default" && k != "examples" {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = defRefs(t[k], out)
		}
	case []any:
		for _, e := range t {
			out = defRefs(e, out)
		}
	}
	return out
}

// schema writes the tool's output schema within budget bytes: the
// definitions it reaches nearest first while they fit, the others open.
// It returns nil when the root alone does not fit, and whether some
// definition was left open.
func (od *outputDefs) schema(p *outputPlan, budget int) (map[string]any, bool) {
	const openDef = len(`"":{},`)
	if p.need <= budget || len(p.reach) == 0 {
		out := p.withDefs(od, p.reach, nil)
		return out, false
	}
	// Written so far: the root, and every reached definition open.
	used := p.rootSize + len(`,"$defs":{}`)
	written := map[string]bool{}
	open := map[string]bool{}
	queue := defRefs(p.root, nil)
	for _, n := range queue {
		if !open[n] {
			open[n] = true
			used += len(n) + openDef
		}
	}
	if used > budget {
		return nil, true
	}
	var full []string
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if written[name] {
			continue
		}
		cost := od.defSize(name) - len(`{}`)
		var added []string
		for _, r := range od.refs[name] {
			if !open[r] && !written[r] && !slices.Contains(added, r) {
				added = append(added, r)
				cost += len(r) + openDef
			}
		}
		if used+cost > budget {
			break
		}
		used += cost
		written[name] = true
		delete(open, name)
		full = append(full, name)
		for _, r := range added {
			open[r] = true
		}
		queue = append(queue, od.refs[name]...)
	}
	return p.withDefs(od, full, open), true
}

// withDefs is the root with the definitions full written and open as {}.
func (p *outputPlan) withDefs(od *outputDefs, full []string, open map[string]bool) map[string]any {
	if len(full)+len(open) == 0 {
		return p.root
	}
	defs := make(map[string]any, len(full)+len(open))
	for _, n := range full {
		defs[n] = od.c.defs[n]
	}
	for n := range open {
		defs[n] = map[string]any{}
	}
	out := make(map[string]any, len(p.root)+1)
	for k, v := range p.root {
		out[k] = v
	}
	out["$defs"] = defs
	return out
}

// shares divides an entry's budget among its tools' needs: each tool gets
// what it needs up to perTool, and the tools needing more than an even
// share of what is left get that share.
func shares(needs []int, perTool, total int) []int {
	out := make([]int, len(needs))
	idx := make([]int, 0, len(needs))
	for i, n := range needs {
		if n > 0 {
			idx = append(idx, i)
		}
	}
	sort.SliceStable(idx, func(a, b int) bool { return needs[idx[a]] < needs[idx[b]] })
	left := total
	for k, i := range idx {
		share := left / (len(idx) - k)
		b := min(needs[i], perTool, share)
		out[i] = b
		left -= b
	}
	return out
}

// planOutput is outputSchema's plan for one schema reference ref, with fn
// building the root around it.
func (im *importer) planOutput(fn func(c *schemaConv) map[string]any) *outputPlan {
	if im.out == nil {
		im.out = newOutputDefs()
	}
	return im.out.plan(fn)
}

// finishOutputs writes the planned output schemas of the tools (im.plans,
// by tool name) within the entry's budgets, checked as the host resolves
// them.
func (im *importer) finishOutputs(tools []sdk.Tool) {
	if len(im.plans) == 0 {
		return
	}
	needs := make([]int, len(tools))
	for i := range tools {
		if p := im.plans[tools[i].Name]; p != nil {
			needs[i] = p.plan.need
		}
	}
	lim := im.cfg.outputLimits
	budget := shares(needs, lim.tool, lim.document)
	trimmed, dropped := 0, 0
	for i := range tools {
		p := im.plans[tools[i].Name]
		if p == nil {
			continue
		}
		s, cut := im.out.schema(p.plan, budget[i])
		if s == nil {
			dropped++
			continue
		}
		if cut {
			trimmed++
		}
		b, err := checkSchema(s)
		if err != nil {
			im.d.Warnf("openapi.document", "operation %s: output schema left out: %v", p.label, err)
			continue
		}
		tools[i].OutputSchema = b
	}
	if trimmed+dropped > 0 {
		im.d.Warnf("openapi.output_schema_limits", "%d output schemas are over their budget (%d bytes a tool, %d for the entry): "+
			"%d are written with their farthest definitions open ({}: any value), %d are left out; raise output_schema_limits to keep more",
			trimmed+dropped, lim.tool, lim.document, trimmed, dropped)
	}
}

// plannedOutput is a built tool's output schema waiting for its budget.
type plannedOutput struct {
	plan  *outputPlan
	label string
}
