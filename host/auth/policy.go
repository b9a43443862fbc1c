package auth

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/ext"
	"google.golang.org/protobuf/types/known/structpb"
)

// Rule is one policy rule: a CEL expression that must be true for a call
// to be allowed.
type Rule struct {
	// Name names the rule in refusals and errors: 1–64 characters of
	// [A-Za-z0-9_.-].
	Name string `json:"name"`
	// Expression is a CEL expression of type bool over caller, tool and
	// args (see Caller, Tool; args is the call's arguments object).
	Expression string `json:"expression"`
}

// Caller is the caller as a policy sees it (`caller` in CEL).
type Caller struct {
	// ID is the caller's identity: "user:<id>", "header:<value>",
	// "session:<digest>", or "" for a stateless request that names none.
	ID string `cel:"id"`
	// User is the authenticated user (a verified token's, else the one
	// Caddy's authentication handler set), "" for none.
	User string `cel:"user"`
	// Issuer and Subject are the token's iss and sub ("" without a token).
	Issuer  string `cel:"issuer"`
	Subject string `cel:"subject"`
	// Claims are the token's claims (empty without a token), a map in
	// CEL.
	Claims *structpb.Struct `cel:"claims"`
	// Scopes are the scopes the token grants.
	Scopes []string `cel:"scopes"`
	// Workspace is the endpoint's workspace.
	Workspace string `cel:"workspace"`
}

// NewCaller is the policy's caller: id is the caller's identity, user
// the authenticated user, and tok the verified token's identity (nil
// without one).
func NewCaller(id, user, workspace string, tok *Identity) *Caller {
	c := &Caller{ID: id, User: user, Workspace: workspace, Claims: noClaims}
	if tok != nil {
		c.Issuer, c.Subject, c.Scopes, c.Claims = tok.Issuer, tok.Subject, tok.Scopes, tok.claims()
	}
	return c
}

var noClaims = &structpb.Struct{Fields: map[string]*structpb.Value{}}

// Tool is the operation a request concerns (`tool` in CEL). The tools of
// a session or async_job family, and the tasks of an async_job, are their
// operation's: its name, not the family tool's.
type Tool struct {
	// Name is the operation's name.
	Name  string `cel:"name"`
	Title string `cel:"title"`
	// Mode is unary, window, session or async_job.
	Mode string `cel:"mode"`
	// Adapter is the adapter that runs it, e.g. rest.
	Adapter     string          `cel:"adapter"`
	Annotations ToolAnnotations `cel:"annotations"`
}

// ToolAnnotations are the tool's MCP annotations, with the protocol's
// defaults for unset ones: not read-only, destructive, not idempotent,
// open world.
type ToolAnnotations struct {
	ReadOnly    bool `cel:"read_only"`
	Destructive bool `cel:"destructive"`
	Idempotent  bool `cel:"idempotent"`
	OpenWorld   bool `cel:"open_world"`
}

// Policy is a compiled set of rules; a call is allowed when every rule
// is true. It is safe for concurrent use.
type Policy struct {
	env   *cel.Env
	rules []*rule
	// usesArgs: some rule reads args, so calls decode their arguments.
	usesArgs bool
}

type rule struct {
	name string
	full cel.Program // caller, tool, args known
	part cel.Program // args unknown (tools/list, and to tell a hidden tool from a refused call)
	args bool        // the rule reads args
}

var ruleName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// CompilePolicy compiles and type-checks rules; an error names the rule.
// No rules is a nil policy, which allows everything.
func CompilePolicy(rules []Rule) (*Policy, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	env, err := cel.NewEnv(
		ext.NativeTypes(ext.ParseStructTags(true), reflect.TypeFor[Caller](), reflect.TypeFor[Tool](), reflect.TypeFor[ToolAnnotations]()),
		cel.Variable("caller", cel.ObjectType("auth.Caller")),
		cel.Variable("tool", cel.ObjectType("auth.Tool")),
		cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
		ext.Strings(),
	)
	if err != nil {
		return nil, fmt.Errorf("policy: %v", err)
	}
	p := &Policy{env: env}
	seen := map[string]bool{}
	for i, r := range rules {
		if !ruleName.MatchString(r.Name) {
			return nil, fmt.Errorf("policy rule %d: name %q: must be 1-64 characters of A-Z a-z 0-9 _ . -", i+1, r.Name)
		}
		if seen[r.Name] {
			return nil, fmt.Errorf("policy rule %q: defined twice", r.Name)
		}
		seen[r.Name] = true
		if strings.TrimSpace(r.Expression) == "" {
			return nil, fmt.Errorf("policy rule %q: expression: required", r.Name)
		}
		ast, iss := env.Compile(r.Expression)
		if iss.Err() != nil {
			return nil, fmt.Errorf("policy rule %q: %v", r.Name, iss.Err())
		}
		if !ast.OutputType().IsExactType(types.BoolType) {
			return nil, fmt.Errorf("policy rule %q: must be a boolean expression, is %s", r.Name, ast.OutputType())
		}
		full, err := env.Program(ast, cel.EvalOptions(cel.OptOptimize))
		if err != nil {
			return nil, fmt.Errorf("policy rule %q: %v", r.Name, err)
		}
		part, err := env.Program(ast, cel.EvalOptions(cel.OptPartialEval))
		if err != nil {
			return nil, fmt.Errorf("policy rule %q: %v", r.Name, err)
		}
		ru := &rule{name: r.Name, full: full, part: part, args: readsArgs(ast)}
		p.usesArgs = p.usesArgs || ru.args
		p.rules = append(p.rules, ru)
	}
	return p, nil
}

// readsArgs reports whether a checked expression refers to args.
func readsArgs(ast *cel.Ast) bool {
	for _, ref := range ast.NativeRep().ReferenceMap() {
		if ref.Name == "args" {
			return true
		}
	}
	return false
}

// Visible reports whether the caller may see the tool at all: no rule is
// false whatever the arguments. A rule that fails to evaluate counts as
// false (the policy fails closed).
func (p *Policy) Visible(c *Caller, t *Tool) bool {
	if p == nil {
		return true
	}
	for _, r := range p.rules {
		if r.hides(p.env, c, t) {
			return false
		}
	}
	return true
}

// hides reports whether the rule is false for the caller and tool
// whatever the arguments.
func (r *rule) hides(env *cel.Env, c *Caller, t *Tool) bool {
	if !r.args {
		return !isTrue(r.full.Eval(map[string]any{"caller": c, "tool": t, "args": emptyArgs}))
	}
	vars, err := cel.PartialVars(map[string]any{"caller": c, "tool": t}, cel.AttributePattern("args"))
	if err != nil {
		return true
	}
	val, _, err := r.part.Eval(vars)
	if err != nil || types.IsError(val) {
		return true
	}
	if types.IsUnknown(val) {
		return false // the arguments decide
	}
	return val != types.True
}

var emptyArgs = map[string]any{}

func isTrue(val ref.Val, _ *cel.EvalDetails, err error) bool {
	return err == nil && val == types.True
}

// Decision is a policy's answer for a call.
type Decision int

// Decisions.
const (
	// Allowed: every rule is true.
	Allowed Decision = iota
	// Hidden: a rule is false whatever the arguments; the tool is not the
	// caller's to see, and the call is answered as for an unknown tool.
	Hidden
	// Refused: a rule is false for these arguments.
	Refused
)

// Refusal is a refused call: the rule that refused it and why.
type Refusal struct {
	Rule string
	// Reason is "" when the rule was false, else its evaluation error.
	Reason string
}

func (r *Refusal) Error() string {
	if r.Reason != "" {
		return fmt.Sprintf("denied by policy rule %q: it could not be evaluated for these arguments (%s)", r.Rule, r.Reason)
	}
	return fmt.Sprintf("denied by policy rule %q", r.Rule)
}

// Check decides a call of the tool with these arguments (a JSON object;
// nil for none). A Refused decision comes with its Refusal.
func (p *Policy) Check(c *Caller, t *Tool, args json.RawMessage) (Decision, *Refusal) {
	if p == nil {
		return Allowed, nil
	}
	vars := map[string]any{"caller": c, "tool": t, "args": emptyArgs}
	if p.usesArgs && len(args) > 0 {
		var m map[string]any
		if err := json.Unmarshal(args, &m); err == nil && m != nil {
			vars["args"] = m
		}
	}
	for _, r := range p.rules {
		val, _, err := r.full.Eval(vars)
		if err == nil && val == types.True {
			continue
		}
		if !r.args || r.hides(p.env, c, t) {
			return Hidden, nil
		}
		ref := &Refusal{Rule: r.name}
		if err != nil {
			ref.Reason = err.Error()
		} else if types.IsError(val) {
			ref.Reason = fmt.Sprint(val)
		}
		return Refused, ref
	}
	return Allowed, nil
}

// Rules names the policy's rules, in order.
func (p *Policy) Rules() []string {
	if p == nil {
		return nil
	}
	out := make([]string, len(p.rules))
	for i, r := range p.rules {
		out[i] = r.name
	}
	return out
}
