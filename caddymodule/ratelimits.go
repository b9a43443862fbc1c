package caddymodule

import (
	"fmt"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/crankmcp/crank/host/ratelimit"
)

// budgets are the process's rate-limit budgets, shared by every handler
// (and by the configs a reload overlaps): a limit of the same name and
// definition keeps one budget across handlers and reloads.
var budgets = ratelimit.NewBudgets()

// unmarshalRateLimit reads one rate_limit block of the crank directive
// and reports whether it was one. Syntax (the fields of ratelimit.Limit):
//
//	rate_limit <name> [<rate>] {
//	    rate     <n>/<s|m|h|duration>
//	    burst    <n>
//	    per      workspace|user|agent|client|address
//	    tool     <name or glob>
//	    family   <operation>
//	    toolset  <toolset>
//	    upstream <address rule>
//	    fleet    [true|false]
//	}
func (h *Handler) unmarshalRateLimit(d *caddyfile.Dispenser) (bool, error) {
	if d.Val() != "rate_limit" {
		return false, nil
	}
	var l ratelimit.Limit
	args := d.RemainingArgs()
	switch len(args) {
	case 2:
		l.Rate = args[1]
		fallthrough
	case 1:
		l.Name = args[0]
	default:
		return true, d.Err("rate_limit: want a name and, optionally, its rate (rate_limit refunds 10/m { ... })")
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if err := l.Set(d.Val(), d.RemainingArgs()); err != nil {
			return true, d.Errf("rate_limit %s: %v", l.Name, err)
		}
	}
	if err := l.Err("rate_limit " + l.Name); err != nil {
		return true, d.Errf("%v", err)
	}
	h.RateLimits = append(h.RateLimits, l)
	return true, nil
}

// validateRateLimits checks the handler's rate limits (a JSON config's
// too): each as Limit.Check says, and no name given twice.
func (h *Handler) validateRateLimits() error {
	seen := map[string]bool{}
	for i := range h.RateLimits {
		l := &h.RateLimits[i]
		if err := l.Err(fmt.Sprintf("crank: rate_limits[%d]", i)); err != nil {
			return err
		}
		if seen[l.Name] {
			return fmt.Errorf("crank: rate_limits[%d].name: %q given twice", i, l.Name)
		}
		seen[l.Name] = true
	}
	return nil
}
