package auth

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestPolicyDecides(t *testing.T) {
	p, err := CompilePolicy([]Rule{
		{Name: "admins-destroy", Expression: `"admin" in caller.claims.groups || !tool.annotations.destructive`},
		{Name: "eu-only", Expression: `!has(args.region) || args.region == "eu"`},
		{Name: "reports-need-scope", Expression: `tool.name != "report" || "reports" in caller.scopes`},
	})
	if err != nil {
		t.Fatal(err)
	}
	admin := NewCaller("user:ann", "ann", "w", &Identity{Claims: map[string]any{"groups": []any{"admin"}}, Scopes: []string{"reports"}})
	guest := NewCaller("user:bob", "bob", "w", &Identity{Claims: map[string]any{"groups": []any{"staff"}}})
	nogroups := NewCaller("session:x", "", "w", nil)
	drop := &Tool{Name: "drop", Annotations: ToolAnnotations{Destructive: true}}
	get := &Tool{Name: "get"}
	report := &Tool{Name: "report", Mode: "async_job"}

	for _, c := range []struct {
		caller  *Caller
		tool    *Tool
		args    string
		visible bool
		want    Decision
		rule    string
	}{
		{admin, drop, `{}`, true, Allowed, ""},
		{guest, drop, `{}`, false, Hidden, ""},
		{nogroups, drop, `{}`, false, Hidden, ""}, // fails closed: no groups claim
		{nogroups, get, `{}`, true, Allowed, ""},
		{guest, get, `{"region":"eu"}`, true, Allowed, ""},
		{guest, get, `{"region":"us"}`, true, Refused, "eu-only"},
		{guest, report, `{}`, false, Hidden, ""},
		{admin, report, `{"region":"us"}`, true, Refused, "eu-only"},
	} {
		if v := p.Visible(c.caller, c.tool); v != c.visible {
			t.Errorf("%s/%s: visible %v, want %v", c.caller.ID, c.tool.Name, v, c.visible)
		}
		d, ref := p.Check(c.caller, c.tool, json.RawMessage(c.args))
		if d != c.want || (ref != nil) != (c.rule != "") || ref != nil && ref.Rule != c.rule {
			t.Errorf("%s/%s %s: %v %+v, want %v %q", c.caller.ID, c.tool.Name, c.args, d, ref, c.want, c.rule)
		}
	}
}

func TestPolicyCompileErrorsNameTheRule(t *testing.T) {
	for _, c := range []struct {
		rules []Rule
		want  string
	}{
		{[]Rule{{Name: "broken", Expression: `caller.claims.groups.exists(g, `}}, `policy rule "broken"`},
		{[]Rule{{Name: "typo", Expression: `caller.clams == {}`}}, `policy rule "typo"`},
		{[]Rule{{Name: "notbool", Expression: `tool.name`}}, `policy rule "notbool": must be a boolean expression`},
		{[]Rule{{Name: "a", Expression: `true`}, {Name: "a", Expression: `true`}}, `policy rule "a": defined twice`},
		{[]Rule{{Name: "bad name", Expression: `true`}}, `name "bad name"`},
		{[]Rule{{Name: "empty", Expression: ` `}}, `policy rule "empty": expression: required`},
	} {
		_, err := CompilePolicy(c.rules)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.rules, err, c.want)
		}
	}
}
