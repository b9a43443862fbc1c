package opsfile_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/crankmcp/crank/host/opsfile"
)

// Placeholders that expand to secrets, and the pairs built from them.
func TestCatalogSecrets(t *testing.T) {
	env := map[string]string{
		"{env.TOKEN}":  "tok-0123456789",
		"{env.ADDR}":   "https://api.example.com",
		"{env.ROOT}":   "https://api.example.com/",
		"{env.HP}":     "db.internal:5432",
		"{env.HOOK}":   "https://hooks.example.com/services/T0000/B0000/XXXXXXXXXXXXXXXXXXXXXXXX",
		"{env.KEYURL}": "https://maps.example.com/api?format=json&key=AIzaSyKEY0123456789",
		"{env.CREDS}":  "https://bob:b0b-secret@db.example.com",
		"{env.USER}":   "alice",
		"{env.PASS}":   "hunter2-pw",
		"{env.SHORT}":  "abc",
	}
	expand := func(s string) string {
		for k, v := range env {
			s = strings.ReplaceAll(s, k, v)
		}
		return s
	}
	cat, err := opsfile.Parse("ops.yaml", []byte(`
operations:
  - name: a
    description: d
    adapter: rest
    config:
      url: "{env.ADDR}/x?token={env.TOKEN}"
      root: "{env.ROOT}"
      db: "{env.HP}"
      hook: "{env.HOOK}"
      maps: "{env.KEYURL}"
      creds: "{env.CREDS}"
      short: "{env.SHORT}"
      openapi: {credentials: {basic: {username: operator, password: "{env.PASS}"}}}
      inline: "https://{env.USER}:{env.PASS}@x.example.com/"
`), opsfile.LoadOptions{Expand: expand})
	if err != nil {
		t.Fatal(err)
	}
	has := func(s string) bool { return slices.Contains(cat.Secrets, s) }
	for _, want := range []string{
		"tok-0123456789",
		env["{env.HOOK}"], "/services/T0000/B0000/XXXXXXXXXXXXXXXXXXXXXXXX", "XXXXXXXXXXXXXXXXXXXXXXXX",
		env["{env.KEYURL}"], "format=json&key=AIzaSyKEY0123456789", "AIzaSyKEY0123456789",
		env["{env.CREDS}"], "bob:b0b-secret", "b0b-secret",
		"alice", "hunter2-pw", "operator:hunter2-pw", "alice:hunter2-pw",
	} {
		if !has(want) {
			t.Errorf("%q is not a secret; secrets: %q", want, cat.Secrets)
		}
	}
	for _, not := range []string{"https://api.example.com", "https://api.example.com/", "db.internal:5432", "abc", "json", "/api", "services"} {
		if has(not) {
			t.Errorf("%q is a secret", not)
		}
	}
}
