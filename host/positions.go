package host

import (
	"reflect"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// positions finds where an operation's field is written in an operations
// file, YAML or JSON (JSON is YAML), for errors that name the line.
type positions struct{ root *yaml.Node }

// positionsOf are the positions of a parsed document.
func positionsOf(doc *yaml.Node) positions {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return positions{}
	}
	return positions{root: doc.Content[0]}
}

// line is the line of op's field (a path such as "limits.max_items" or
// "tags[2]"): of the deepest part of the path the file has, so a field
// that is missing points at its operation. op is an operation's name or
// "#n" (its place, from 1); "" starts at the file's top. 0 when unknown.
func (p positions) line(op, field string) int {
	n, line := p.root, 0
	if n == nil {
		return 0
	}
	if op != "" {
		n, line = p.operation(op)
		if n == nil {
			return 0
		}
	}
	for _, part := range splitPath(field) {
		next, l := child(n, part)
		if next == nil {
			break
		}
		n, line = next, l
	}
	return line
}

// operation is the mapping of the operation named op, and its line.
func (p positions) operation(op string) (*yaml.Node, int) {
	ops, _ := child(p.root, "operations")
	if ops == nil || ops.Kind != yaml.SequenceNode {
		return nil, 0
	}
	if i, err := strconv.Atoi(strings.TrimPrefix(op, "#")); err == nil && strings.HasPrefix(op, "#") {
		if i >= 1 && i <= len(ops.Content) {
			return resolve(ops.Content[i-1]), ops.Content[i-1].Line
		}
		return nil, 0
	}
	for _, o := range ops.Content {
		if name, _ := child(resolve(o), "name"); name != nil && name.Value == op {
			return resolve(o), o.Line
		}
	}
	return nil, 0
}

// child is a mapping's value under key (with the key's line), or a
// sequence's item at an index.
func child(n *yaml.Node, key string) (*yaml.Node, int) {
	n = resolve(n)
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				return resolve(n.Content[i+1]), n.Content[i].Line
			}
		}
	case yaml.SequenceNode:
		if i, err := strconv.Atoi(key); err == nil && i >= 0 && i < len(n.Content) {
			return resolve(n.Content[i]), n.Content[i].Line
		}
	}
	return nil, 0
}

func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// splitPath splits "a.b[2].c" into a, b, 2, c.
func splitPath(field string) []string {
	var parts []string
	for _, p := range strings.Split(field, ".") {
		for p != "" {
			i := strings.IndexByte(p, '[')
			if i < 0 {
				parts = append(parts, p)
				break
			}
			if i > 0 {
				parts = append(parts, p[:i])
			}
			j := strings.IndexByte(p[i:], ']')
			if j < 0 {
				parts = append(parts, p[i+1:])
				break
			}
			parts = append(parts, p[i+1:i+j])
			p = p[i+j+1:]
		}
	}
	return parts
}

// JSONFields are the JSON names of a struct type's fields, in order.
func JSONFields(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}

// find is the line of the first key named key anywhere in the file (for an
// error that names a field but not its place); 0 when there is none.
func (p positions) find(key string) int {
	var walk func(n *yaml.Node) int
	walk = func(n *yaml.Node) int {
		if n == nil || n.Kind == yaml.AliasNode {
			return 0
		}
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == key {
					return n.Content[i].Line
				}
			}
		}
		for _, c := range n.Content {
			if l := walk(c); l > 0 {
				return l
			}
		}
		return 0
	}
	if key == "" {
		return 0
	}
	return walk(p.root)
}

// Line is the line of the operation's field in its file (see ConfigError);
// 0 when unknown.
func (op *Operation) Line(field string) int { return op.pos.line(op.Name, field) }
