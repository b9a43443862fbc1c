package catalog

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/crankmcp/crank/host/jsonpath"

	yaml "go.yaml.in/yaml/v3"

	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/host/ratelimit"
)

// YAML renders the document as an operations file in YAML, for export
// (GitOps): version 1, the operations, each entry's fields in the order
// the operations file format lists them (name, title, description,
// adapter, mode, ...), nested keys sorted, multi-line strings as literal
// blocks, and the rate limits, fields in ratelimit.Limit's order.
// ParseDocument reads it back to the same document.
func (d *Document) YAML() []byte {
	ops := &yaml.Node{Kind: yaml.SequenceNode}
	for _, e := range d.Operations {
		v, err := jsonpath.Decode(e)
		if err != nil {
			continue
		}
		ops.Content = append(ops.Content, yamlNode(v, opsfile.EntryFields()))
	}
	root := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
		scalar("version"), {Kind: yaml.ScalarNode, Tag: "!!int", Value: "1"},
		scalar("operations"), ops,
	}}
	if len(d.RateLimits) > 0 {
		var order []string
		for _, f := range ratelimit.Fields() {
			order = append(order, f.Name)
		}
		limits := &yaml.Node{Kind: yaml.SequenceNode}
		for _, l := range d.RateLimits {
			if v, err := jsonpath.Decode(l); err == nil {
				limits.Content = append(limits.Content, yamlNode(v, order))
			}
		}
		root.Content = append(root.Content, scalar("rate_limits"), limits)
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	_ = enc.Encode(root)
	_ = enc.Close()
	return b.Bytes()
}

func scalar(s string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
	if strings.Contains(s, "\n") {
		n.Style = yaml.LiteralStyle
	}
	return n
}

// yamlNode converts a JSON value (numbers as json.Number) to a YAML node;
// order, when given, orders a mapping's keys (the rest follow sorted).
func yamlNode(v any, order []string) *yaml.Node {
	switch t := v.(type) {
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
	case bool:
		val := "false"
		if t {
			val = "true"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: val}
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(t.String(), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: t.String()}
	case string:
		return scalar(t)
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode}
		for _, e := range t {
			n.Content = append(n.Content, yamlNode(e, nil))
		}
		if len(t) == 0 {
			n.Style = yaml.FlowStyle
		}
		return n
	case map[string]any:
		n := &yaml.Node{Kind: yaml.MappingNode}
		keys := slices.Sorted(maps.Keys(t))
		if order != nil {
			slices.SortStableFunc(keys, func(a, b string) int { return rank(a, order) - rank(b, order) })
		}
		for _, k := range keys {
			n.Content = append(n.Content, scalar(k), yamlNode(t[k], nil))
		}
		if len(t) == 0 {
			n.Style = yaml.FlowStyle
		}
		return n
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
}

func rank(k string, order []string) int {
	if i := slices.Index(order, k); i >= 0 {
		return i
	}
	return len(order)
}
