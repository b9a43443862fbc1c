package caddymodule

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
)

// A built-in adapter runs as its own executable when one sits beside the
// gateway's, else as the gateway's executable with the crank-adapter
// subcommand; a file there that is not executable is not run.
func TestBuiltinSpecPrefersAdapterExecutable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	exe := filepath.Join(dir, "crank")
	write := func(name string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("crank", 0o755)
	write("crank-adapter-rest", 0o755)
	write("crank-adapter-soap", 0o644)
	if err := os.Mkdir(filepath.Join(dir, "crank-adapter-grpc"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, command string
		args          []string
	}{
		{"rest", filepath.Join(dir, "crank-adapter-rest"), nil},
		{"soap", exe, []string{AdapterCommand, "soap"}},
		{"grpc", exe, []string{AdapterCommand, "grpc"}},
		{"graphql", exe, []string{AdapterCommand, "graphql"}},
	} {
		spec, ok := builtinSpecOf(exe, tc.name)
		if !ok || spec.Name != tc.name || spec.Command != tc.command || !slices.Equal(spec.Args, tc.args) {
			t.Errorf("%s: %+v %v, want %s %v", tc.name, spec, ok, tc.command, tc.args)
		}
	}
	if _, ok := builtinSpecOf(exe, "acme"); ok {
		t.Error("acme is not built in")
	}
}

// What a built-in adapter's doc.go says a config field defaults to is what
// its config schema says, which is what the field's default tag makes of
// an absent field: "# default 8 MiB" in its listing, "the default is
// 30s" or `"auto" (the default)` in the field's bullet, "stream.end_data
// ("[DONE]" by default" in prose.
func TestAdapterDocDefaults(t *testing.T) {
	t.Parallel()
	for name, newAdapter := range builtins {
		desc, err := newAdapter().Describe(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		doc, err := os.ReadFile(filepath.Join("..", "plugins", name, "doc.go"))
		if err != nil {
			t.Fatal(err)
		}
		claims := docDefaults(string(doc))
		for _, c := range claims {
			def, ok := schemaDefault(desc.ConfigSchema, c.field)
			switch {
			case !ok:
				t.Errorf("plugins/%s/doc.go:%d: %s defaults to %s, but the config schema states no default", name, c.line, c.field, c.value)
			case !sameDefault(def, c.value):
				t.Errorf("plugins/%s/doc.go:%d: %s defaults to %s, but the config schema says %s", name, c.line, c.field, c.value, def)
			}
		}
		if len(claims) == 0 && name != "mcp" {
			t.Errorf("plugins/%s/doc.go states no default this test finds", name)
		}
	}
}

type docDefault struct {
	line         int
	field, value string
}

// A default's value as documents write it: a quoted string, a size, a
// duration, a number or a boolean.
const docLiteral = `("[^"<]*"|\d+(?:\.\d+)? ?(?:KiB|MiB|GiB)\b|\d+(?:ms|s|m|h)\b|\d+\b|true\b|false\b)`

var (
	docKeyRE      = regexp.MustCompile(`^( *)(?:# *)?([a-z_]+):`)
	docCommentRE  = regexp.MustCompile(`\bdefault:? ` + docLiteral + `(?: for| otherwise)?`)
	docBulletRE   = regexp.MustCompile(`^ {3}- ([a-z_][a-z_.]*):`)
	docBulletDef  = []*regexp.Regexp{regexp.MustCompile(`\bdefault (?:is )?` + docLiteral + `(?: for| otherwise)?`), regexp.MustCompile(docLiteral + ` \((?:the )?default\)`)}
	docProseDefRE = regexp.MustCompile(`\b([a-z_]+(?:\.[a-z_]+)*) \((?:default ` + docLiteral + `|` + docLiteral + ` by default)`)
)

// docDefaults reads the defaults a doc.go states: in its YAML listings
// (the field from the keys above it), in its field bullets and in prose.
func docDefaults(doc string) []docDefault {
	var out []docDefault
	var stack []struct {
		indent int
		key    string
	}
	var bullet, para strings.Builder
	bulletField, bulletLine, paraLine := "", 0, 0
	endBullet := func() {
		for _, re := range docBulletDef {
			if d := re.FindStringSubmatch(bullet.String()); d != nil && !strings.HasSuffix(d[0], " for") && !strings.HasSuffix(d[0], " otherwise") {
				out = append(out, docDefault{bulletLine, bulletField, d[1]})
			}
		}
		bullet.Reset()
		bulletField = ""
	}
	flush := func() {
		endBullet()
		for _, m := range docProseDefRE.FindAllStringSubmatch(para.String(), -1) {
			out = append(out, docDefault{paraLine, m[1], m[2] + m[3]})
		}
		para.Reset()
	}
	for i, l := range strings.Split(doc, "\n") {
		n := i + 1
		if code, ok := strings.CutPrefix(l, "//\t"); ok {
			content, comment, _ := strings.Cut(code, " # ")
			if m := docKeyRE.FindStringSubmatch(content); m != nil {
				for len(stack) > 0 && stack[len(stack)-1].indent >= len(m[1]) {
					stack = stack[:len(stack)-1]
				}
				stack = append(stack, struct {
					indent int
					key    string
				}{len(m[1]), m[2]})
				if d := docCommentRE.FindStringSubmatch(comment); d != nil && !strings.HasSuffix(d[0], " for") && !strings.HasSuffix(d[0], " otherwise") {
					var path []string
					for _, s := range stack {
						path = append(path, s.key)
					}
					out = append(out, docDefault{n, strings.Join(path, "."), d[1]})
				}
			}
			continue
		}
		stack = nil
		text, ok := strings.CutPrefix(l, "//")
		if !ok || strings.TrimSpace(text) == "" {
			flush()
			continue
		}
		if m := docBulletRE.FindStringSubmatch(text); m != nil {
			endBullet()
			bulletField, bulletLine = m[1], n
		} else if !strings.HasPrefix(text, "     ") {
			endBullet()
		}
		if bulletField != "" {
			bullet.WriteString(strings.TrimSpace(text) + " ")
		}
		if para.Len() == 0 {
			paraLine = n
		}
		para.WriteString(strings.TrimSpace(text) + " ")
	}
	flush()
	return out
}

// schemaDefault is the default the schema states for a dotted field.
func schemaDefault(schema json.RawMessage, field string) (json.RawMessage, bool) {
	var s jsonschema.Schema
	if json.Unmarshal(schema, &s) != nil {
		return nil, false
	}
	p := &s
	for _, seg := range strings.Split(field, ".") {
		if p = p.Properties[seg]; p == nil {
			return nil, false
		}
	}
	return p.Default, p.Default != nil
}

// sameDefault reports whether a schema default is what a document wrote.
func sameDefault(def json.RawMessage, doc string) bool {
	var v any
	if json.Unmarshal(def, &v) != nil {
		return false
	}
	if s, ok := v.(string); ok {
		if a, err := time.ParseDuration(s); err == nil {
			b, err := time.ParseDuration(doc)
			return err == nil && a == b
		}
		return `"`+s+`"` == doc || s == doc
	}
	for unit, n := range map[string]float64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if num, ok := strings.CutSuffix(doc, unit); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
			return err == nil && v == f*n
		}
	}
	return fmt.Sprint(v) == doc
}
