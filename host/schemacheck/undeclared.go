package schemacheck

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Undeclared arguments. A tool's arguments are the properties its input
// schema declares: the host refuses any other one before a request is
// built, for every adapter (the REST adapter's auto body would forward
// it to the upstream). The operations file closes an input schema that
// says nothing about further properties as it compiles it
// (opsfile's closeInputSchema), so that undeclared can name what it
// does not declare, with what the tool takes — a message the validator's
// one failure ("unknown field") cannot give.

// undeclared names the arguments a closed input schema does not declare
// ("" when there are none, or when the schema takes more).
func (s *Schema) undeclared(v any) string {
	args, _ := v.(map[string]any)
	root := s.s
	if root == nil || len(args) == 0 {
		return ""
	}
	d := &declared{names: map[string]bool{}, seen: map[*jsonschema.Schema]bool{}}
	switch {
	case root.AdditionalProperties == false:
		// additionalProperties sees its siblings only.
		d.add(root, false, 0)
	case isFalse(root.UnevaluatedProperties) && root.AdditionalProperties == nil:
		d.add(root, true, 0)
	default:
		return ""
	}
	var unknown []string
	for k := range args {
		if !d.has(k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return ""
	}
	sort.Strings(unknown)
	list := make([]string, 0, min(len(unknown), 5))
	for i, k := range unknown {
		if i == 5 {
			list = append(list, fmt.Sprintf("… (%d more)", len(unknown)-5))
			break
		}
		if len(k) > 64 {
			k = strings.ToValidUTF8(k[:64], "") + "…"
		}
		list = append(list, strconv.Quote(k))
	}
	what := "unknown argument "
	if len(unknown) > 1 {
		what = "unknown arguments "
	}
	takes := "the tool takes no arguments"
	if names := d.list(); names != "" {
		takes = "the tool takes " + names
	}
	return what + strings.Join(list, ", ") + ": " + takes
}

func isFalse(s *jsonschema.Schema) bool { return s != nil && s.Bool != nil && !*s.Bool }

// declared collects the property names and patterns a schema declares.
type declared struct {
	names    map[string]bool
	patterns []jsonschema.Regexp
	seen     map[*jsonschema.Schema]bool
}

func (d *declared) add(s *jsonschema.Schema, deep bool, depth int) {
	if s == nil || d.seen[s] || depth > 16 {
		return
	}
	d.seen[s] = true
	for name := range s.Properties {
		d.names[name] = true
	}
	for re := range s.PatternProperties {
		d.patterns = append(d.patterns, re)
	}
	if !deep {
		return
	}
	subs := append(append(append([]*jsonschema.Schema{s.If, s.Then, s.Else, s.Ref}, s.AllOf...), s.AnyOf...), s.OneOf...)
	for _, ds := range s.DependentSchemas {
		subs = append(subs, ds)
	}
	for _, sub := range subs {
		d.add(sub, true, depth+1)
	}
}

func (d *declared) has(name string) bool {
	if d.names[name] {
		return true
	}
	for _, re := range d.patterns {
		if re.MatchString(name) {
			return true
		}
	}
	return false
}

// list names the declared properties, at most 20.
func (d *declared) list() string {
	names := make([]string, 0, len(d.names))
	for n := range d.names {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) > 20 {
		names = append(names[:20], fmt.Sprintf("… (%d more)", len(names)-20))
	}
	return strings.Join(names, ", ")
}
