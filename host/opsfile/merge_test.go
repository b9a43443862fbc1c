package opsfile_test

import (
	"strings"
	"testing"

	"github.com/crankmcp/crank/host/opsfile"
)

func TestMerge(t *testing.T) {
	parse := func(name, yaml string) *opsfile.File {
		t.Helper()
		c, err := opsfile.Parse(name, []byte(yaml), opsfile.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a := parse("/etc/crank/a.yaml", `
adapters: {x: {command: /bin/x}}
operations: [{name: one, description: d, adapter: x, config: {k: v}}]`)
	b := parse("/srv/b.yaml", `
adapters: {x: {command: /bin/x}}
operations: [{name: two, description: d, adapter: x, config: {k: v}}]`)
	m, err := opsfile.Merge(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Operations) != 2 || m.Operations[1].Dir != "/srv" || m.Operations[0].File != "/etc/crank/a.yaml" {
		t.Fatalf("merged: %+v", m.Operations)
	}

	c := parse("/srv/c.yaml", `
adapters: {x: {command: /bin/other}}
operations: [{name: one, description: d, adapter: x, config: {k: v}}]`)
	_, err = opsfile.Merge(a, c)
	for _, want := range []string{
		`/srv/c.yaml:2: /adapters/x: declared differently in /etc/crank/a.yaml`,
		`/srv/c.yaml:3: operation "one": /name: duplicate operation name (also in /etc/crank/a.yaml)`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in %v", want, err)
		}
	}
}

func TestYAML12Keys(t *testing.T) {
	c, err := opsfile.Parse("ops.yaml", []byte(`
operations:
  - name: point
    description: d
    adapter: x
    input_schema:
      type: object
      properties: {x: {type: number}, y: {type: number}, on: {type: boolean}}
    config: {k: v}
`), opsfile.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s := string(c.Operations[0].InputSchema); !strings.Contains(s, `"y":`) || !strings.Contains(s, `"on":`) {
		t.Fatalf("YAML 1.1 key conversion: %s", s)
	}
}
