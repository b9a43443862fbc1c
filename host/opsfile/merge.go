package opsfile

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/crankmcp/crank/host/ratelimit"
	"github.com/crankmcp/crank/plugins/sdk/pointer"
)

// Merge combines several loaded operations files into one, as a handler
// serving them all sees it. Operation names must be unique across the
// files; an adapter declared in two files must be declared alike.
func Merge(cats ...*File) (*File, error) {
	if len(cats) == 1 {
		return cats[0], nil
	}
	var sources []string
	for _, c := range cats {
		sources = append(sources, c.Source)
	}
	out := &File{Source: strings.Join(sources, ", "), Adapters: map[string]AdapterDecl{}, byName: map[string]*Operation{}}
	from := map[string]string{}
	var errs Problems
	secrets := map[string]bool{}
	limits := map[string]ratelimit.Limit{}
	for _, c := range cats {
		for name, d := range c.Adapters {
			if prev, ok := out.Adapters[name]; ok && !sameAdapter(prev, d) {
				ptr := "/adapters/" + pointer.Key(name)
				errs = append(errs, Problem{File: c.Source, Line: c.pos.line(ptr), Pointer: ptr,
					Message: fmt.Sprintf("declared differently in %s", from["adapter:"+name])})
				continue
			}
			out.Adapters[name] = d
			from["adapter:"+name] = c.Source
		}
		for _, op := range c.Operations {
			if first, ok := from[op.Name]; ok {
				errs = append(errs, op.Problem("/name", "duplicate operation name (also in "+first+")"))
				continue
			}
			from[op.Name] = c.Source
			out.Operations = append(out.Operations, op)
			out.byName[op.Name] = op
		}
		for _, s := range c.Secrets {
			secrets[s] = true
		}
		for i, l := range c.RateLimits {
			key := "rate_limit:" + l.Name
			switch prev, ok := limits[l.Name]; {
			case !ok:
				limits[l.Name] = l
				from[key] = c.Source
				out.RateLimits = append(out.RateLimits, l)
			case prev.ID() != l.ID():
				ptr := fmt.Sprintf("/rate_limits/%d/name", i)
				errs = append(errs, Problem{File: c.Source, Line: c.pos.line(ptr), Pointer: ptr,
					Message: fmt.Sprintf("rate limit %q is defined differently in %s", l.Name, from[key])})
			}
		}
	}
	out.Secrets = slices.Sorted(maps.Keys(secrets))
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

func sameAdapter(a, b AdapterDecl) bool {
	if a.Command != b.Command || !slices.Equal(a.Args, b.Args) || len(a.Env) != len(b.Env) {
		return false
	}
	for k, v := range a.Env {
		if b.Env[k] != v {
			return false
		}
	}
	return true
}
