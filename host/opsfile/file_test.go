package opsfile_test

import (
	"strings"
	"testing"

	"github.com/crankmcp/crank/host/opsfile"
)

func TestLoadErrors(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"bad yaml", "operations: [", "not valid YAML"},
		{"unknown field", "operations: []\nfoo: 1", `ops.yaml:2: /foo: unknown field (known fields: version, adapters, operations, rate_limits)`},
		{"misspelled entry field", "operations:\n  - name: a\n    descripton: d\n    adapter: test\n    config: {behavior: echo}", `ops.yaml:3: operation "a": /descripton: unknown field (did you mean "description"?)`},
		{"wrong type", "operations:\n  - name: a\n    description: d\n    adapter: [test]\n    config: {}", `ops.yaml:4: operation "a": /adapter: must be a string, got a list`},
		{"json position", "{\"operations\": [\n {\"name\": \"a\", \"description\": \"d\",\n  \"adapter\": \"test\", \"mode\": \"forever\", \"config\": {}}]}", `ops.yaml:3: operation "a": /mode: must be one of unary, window, session, async_job`},
		{"nested position", "operations:\n  - name: a\n    description: d\n    adapter: test\n    mode: window\n    limits:\n      max_itemz: 5\n    config: {}", `ops.yaml:7: operation "a": /limits/max_itemz: unknown field (did you mean "max_items"?)`},
		{"no ops", "operations: []", "/operations: at least one operation is required"},
		{"bad name", "operations: [{name: 'a b', description: d, adapter: test, config: {}}]", `operation "a b": /name: must be`},
		{"dup", "operations: [{name: a, description: d, adapter: test, config: {behavior: echo}}, {name: a, description: d, adapter: test, config: {behavior: echo}}]", `operation "a": /name: duplicate operation name (also /operations/0)`},
		{"bad schema", "operations: [{name: a, description: d, adapter: test, input_schema: {type: string}, config: {behavior: echo}}]", `/input_schema: must have "type": "object"`},
		{"bad timeout", "operations: [{name: a, description: d, adapter: test, timeout: soon, config: {behavior: echo}}]", `/timeout: not a valid duration: use a Go duration such as "10s" or "1500ms"`},
		{"bad mode", "operations: [{name: a, description: d, adapter: test, mode: forever, config: {behavior: echo}}]", `/mode: must be one of unary, window, session, async_job`},
		{"no config", "operations: [{name: a, description: d, adapter: test}]", `/config: is required`},
		{"rate limit field", "operations: [{name: a, description: d, adapter: test, config: {}}]\nrate_limits:\n  - {name: r, rate: 10/m, burts: 2}",
			`ops.yaml:3: /rate_limits/0/burts: unknown field (did you mean "burst"?)`},
		{"rate limit rate", "operations: [{name: a, description: d, adapter: test, config: {}}]\nrate_limits:\n  - name: r\n    rate: 10/fortnight",
			`ops.yaml:4: /rate_limits/0/rate: the period must be s, m, h or a duration such as 30s, got "fortnight"`},
		{"rate limit scope", "operations: [{name: a, description: d, adapter: test, config: {}}]\nrate_limits:\n  - {name: r, rate: 1/s, tool: a, family: b}",
			`/rate_limits/0/family: a limit has one scope: it sets tool already`},
		{"rate limit twice", "operations: [{name: a, description: d, adapter: test, config: {}}]\nrate_limits:\n  - {name: r, rate: 1/s}\n  - {name: r, rate: 2/s}",
			`/rate_limits/1/name: duplicate rate limit name (also /rate_limits/0)`},
	}
	for _, c := range cases {
		_, err := opsfile.Parse("ops.yaml", []byte(c.yaml), opsfile.LoadOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "ops.yaml") {
			t.Errorf("%s: want error containing %q, got %v", c.name, c.want, err)
		}
	}
}
