package caddymodule

import (
	"fmt"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/crankmcp/crank/internal/telemetry"
)

// provisionTelemetry registers Crank's collectors in the config's metrics
// registry (the one Caddy's admin /metrics endpoint and the metrics
// handler serve). The collectors live for the whole process: a reload
// registers the same collectors in the new config's registry, so series
// are neither reset nor duplicated. Placeholders in the tracing headers
// ({env.OTLP_TOKEN}) are replaced here; nothing is dialled.
func (a *App) provisionTelemetry(ctx caddy.Context) error {
	if err := telemetry.Register(ctx.GetMetricsRegistry()); err != nil {
		return fmt.Errorf("crank: metrics: %w", err)
	}
	if a.Tracing != nil {
		repl := caddy.NewReplacer()
		for k, v := range a.Tracing.Headers {
			a.Tracing.Headers[k] = repl.ReplaceKnown(v, "")
		}
	}
	return nil
}

// startTracing installs the config's trace export, process-wide (off when
// the config has no tracing block).
func (a *App) startTracing() error {
	if err := telemetry.ConfigureTracing(a.Tracing); err != nil {
		return fmt.Errorf("crank: tracing: %w", err)
	}
	return nil
}

// unmarshalTracing parses the tracing block of the crank global option:
//
//	tracing {
//	    endpoint     <host:port|url>
//	    protocol     grpc|http
//	    insecure
//	    sample_ratio <0..1>
//	    service_name <name>
//	    header       <name> <value>
//	}
func unmarshalTracing(d *caddyfile.Dispenser) (*telemetry.TracingConfig, error) {
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	t := &telemetry.TracingConfig{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch opt := d.Val(); opt {
		case "endpoint":
			err = oneArg(d, &t.Endpoint)
		case "protocol":
			err = oneArg(d, &t.Protocol)
		case "service_name":
			err = oneArg(d, &t.ServiceName)
		case "insecure":
			if d.NextArg() {
				return nil, d.ArgErr()
			}
			t.Insecure = true
		case "sample_ratio":
			var s string
			if err = oneArg(d, &s); err == nil {
				r, perr := strconv.ParseFloat(s, 64)
				if perr != nil {
					return nil, d.Errf("tracing: sample_ratio: %q is not a number", s)
				}
				t.SampleRatio = &r
			}
		case "header":
			args := d.RemainingArgs()
			if len(args) != 2 {
				return nil, d.ArgErr()
			}
			if t.Headers == nil {
				t.Headers = map[string]string{}
			}
			t.Headers[args[0]] = args[1]
		default:
			return nil, d.Errf("unrecognized tracing option %q", opt)
		}
		if err != nil {
			return nil, err
		}
	}
	if err := t.Check(); err != nil {
		return nil, d.Errf("tracing: %v", err)
	}
	return t, nil
}
