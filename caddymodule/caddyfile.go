package caddymodule

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/crankmcp/crank/store"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("crank", parseHandler)
	httpcaddyfile.RegisterDirectiveOrder("crank", httpcaddyfile.Before, "respond")
	httpcaddyfile.RegisterGlobalOption("crank", parseGlobal)
}

func parseHandler(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	m := new(Handler)
	err := m.UnmarshalCaddyfile(h.Dispenser)
	return m, err
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	crank [<operations_file...>] {
//	    operations      <operations_file...>
//	    catalog         <name>
//	    allowed_origins <origin...>
//	    session_timeout <duration>
//	    stateless
//	    json_response
//	    workspace       <id>
//	    agent_header    <header>
//	    quotas {
//	        max_sessions_per_workspace           <n>
//	        max_sessions_per_agent               <n>
//	        max_jobs_per_workspace               <n>
//	        max_jobs_per_agent                   <n>
//	        max_sessions_per_client              <n>
//	        max_jobs_per_client                  <n>
//	        max_retained_jobs_per_workspace      <n>
//	        max_retained_jobs_per_agent          <n>
//	        max_retained_job_bytes_per_workspace <size>
//	        max_retained_job_bytes_per_agent     <size>
//	        max_retained_jobs_per_client         <n>
//	        max_retained_job_bytes_per_client    <size>
//	        max_event_bytes_per_session          <size>
//	        max_event_bytes_per_client           <size>
//	    }
//	    mode               stateful|stateless
//	    sessionless_legacy allow|refuse
//	    hot_path           on|off
//	    keepalive_interval <duration>|off
//	    event_store        etcd|off
//	    event_max_events   <n>
//	    event_max_bytes    <size>
//	    event_ttl          <duration>
//	    max_mcp_sessions            <n>|off
//	    max_mcp_sessions_per_client <n>|off
//	    max_mcp_session_state       <size>
//	    max_sessionless_requests_per_client <n>|off   (a second)
//	    on_load_error      retry|fail   (load.go)
//	    auth   { ... }   (auth.go)
//	    policy { ... }   (auth.go)
//	    view   { ... }   (view.go)
//	    server_card { ... }   (servercard.go)
//	    mesh        { ... }   (mesh.go)
//	    rate_limit <name> [<rate>] { ... }   (ratelimits.go; repeatable)
//	}
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	h.Operations = append(h.Operations, d.RemainingArgs()...)
	for d.NextBlock(0) {
		switch d.Val() {
		case "operations":
			files := d.RemainingArgs()
			if len(files) == 0 {
				return d.ArgErr()
			}
			h.Operations = append(h.Operations, files...)
		case "allowed_origins":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			h.AllowedOrigins = append(h.AllowedOrigins, args...)
		case "session_timeout":
			if !d.NextArg() {
				return d.ArgErr()
			}
			dur, err := caddy.ParseDuration(d.Val())
			if err != nil {
				return d.Errf("session_timeout: %v", err)
			}
			if dur <= 0 {
				return d.Errf("session_timeout: must be positive (got %s)", d.Val())
			}
			h.SessionTimeout = caddy.Duration(dur)
			if d.NextArg() {
				return d.ArgErr()
			}
		case "stateless":
			if d.NextArg() {
				return d.ArgErr()
			}
			h.Stateless = true
		case "json_response":
			if d.NextArg() {
				return d.ArgErr()
			}
			h.JSONResponse = true
		case "catalog":
			if err := h.unmarshalCatalog(d); err != nil { // catalog.go
				return err
			}
		case "workspace":
			if !d.AllArgs(&h.Workspace) {
				return d.ArgErr()
			}
		case "agent_header":
			if !d.AllArgs(&h.AgentHeader) {
				return d.ArgErr()
			}
		case "quotas":
			q, err := unmarshalQuotas(d)
			if err != nil {
				return err
			}
			h.Quotas = q
		default:
			if ok, err := h.TransportConfig.unmarshalCaddyfile(d); ok || err != nil {
				if err != nil {
					return err
				}
				continue
			}
			if ok, err := h.unmarshalAuthz(d); ok || err != nil { // auth.go
				if err != nil {
					return err
				}
				continue
			}
			if ok, err := h.unmarshalRateLimit(d); ok || err != nil { // ratelimits.go
				if err != nil {
					return err
				}
				continue
			}
			if ok, err := h.unmarshalMesh(d); ok || err != nil { // mesh.go
				if err != nil {
					return err
				}
				continue
			}
			if ok, err := h.unmarshalView(d); ok || err != nil { // view.go
				if err != nil {
					return err
				}
				continue
			}
			if ok, err := h.unmarshalServerCard(d); ok || err != nil { // servercard.go
				if err != nil {
					return err
				}
				continue
			}
			if ok, err := h.unmarshalLoad(d); ok || err != nil { // load.go
				if err != nil {
					return err
				}
				continue
			}
			if ok, err := h.SessionLimits.unmarshalCaddyfile(d); ok || err != nil {
				if err != nil {
					return err
				}
				continue
			}
			return d.Errf("unrecognized crank subdirective %q", d.Val())
		}
	}
	if len(h.Operations) == 0 && h.Catalog == "" {
		return d.Err("crank: an operations file or a catalog is required (crank <file...>, operations <file...> or catalog <name>)")
	}
	return nil
}

// parseGlobal sets up the crank app from the global option block. Syntax:
//
//	crank {
//	    etcd {
//	        endpoints    <url...>
//	        prefix       <key_prefix>
//	        dial_timeout <duration>
//	        username     <name>
//	        password     <password>
//	        op_timeout   <duration>
//	        owner_ttl    <duration>
//	        replica_name <name>
//	        tls {
//	            ca_file     <file>
//	            cert_file   <file>
//	            key_file    <file>
//	            server_name <name>
//	        }
//	    }
//	    embedded_etcd {
//	        data_dir                  <dir>
//	        client_url                <url>
//	        peer_url                  <url>
//	        prefix                    <key_prefix>
//	        quota_backend_bytes       <size>
//	        auto_compaction_retention <duration>
//	    }
//	    quotas {
//	        max_sessions_per_replica <n>
//	        max_jobs_per_replica     <n>
//	    }
//	    catalog_history <n>
//	    tracing {
//	        endpoint     <host:port|url>
//	        protocol     grpc|http
//	        insecure
//	        sample_ratio <0..1>
//	        service_name <name>
//	        header       <name> <value>
//	    }
//	}
//
// Without an etcd block, an embedded etcd runs in the Caddy process.
func parseGlobal(d *caddyfile.Dispenser, _ any) (any, error) {
	app := new(App)
	if err := app.UnmarshalCaddyfile(d); err != nil {
		return nil, err
	}
	return httpcaddyfile.App{Name: "crank", Value: caddyconfig.JSON(app, nil)}, nil
}

// UnmarshalCaddyfile sets up the app from the global option's tokens.
func (a *App) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // option name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "etcd":
			if a.Etcd == nil {
				a.Etcd = &EtcdConfig{}
			}
			for nesting := d.Nesting(); d.NextBlock(nesting); {
				var err error
				switch d.Val() {
				case "endpoints":
					a.Etcd.Endpoints = append(a.Etcd.Endpoints, d.RemainingArgs()...)
					if len(a.Etcd.Endpoints) == 0 {
						return d.ArgErr()
					}
				case "prefix":
					err = oneArg(d, &a.Etcd.Prefix)
				case "username":
					err = oneArg(d, &a.Etcd.Username)
				case "password":
					err = oneArg(d, &a.Etcd.Password)
				case "dial_timeout", "op_timeout", "owner_ttl":
					opt := d.Val()
					var s string
					if err = oneArg(d, &s); err == nil {
						var dur caddy.Duration
						if dur, err = parseDuration(d, opt, s); err == nil {
							switch opt {
							case "dial_timeout":
								a.Etcd.DialTimeout = dur
							case "op_timeout":
								a.Etcd.OpTimeout = dur
							default:
								a.Etcd.OwnerTTL = dur
							}
						}
					}
				case "replica_name":
					err = oneArg(d, &a.Etcd.ReplicaName)
				case "tls":
					if a.Etcd.TLS == nil {
						a.Etcd.TLS = &EtcdTLSConfig{}
					}
					t := a.Etcd.TLS
					for tn := d.Nesting(); d.NextBlock(tn); {
						switch d.Val() {
						case "ca_file":
							err = oneArg(d, &t.CAFile)
						case "cert_file":
							err = oneArg(d, &t.CertFile)
						case "key_file":
							err = oneArg(d, &t.KeyFile)
						case "server_name":
							err = oneArg(d, &t.ServerName)
						default:
							return d.Errf("unrecognized etcd tls option %q", d.Val())
						}
						if err != nil {
							return err
						}
					}
				default:
					return d.Errf("unrecognized etcd option %q", d.Val())
				}
				if err != nil {
					return err
				}
			}
		case "embedded_etcd":
			if a.EmbeddedEtcd == nil {
				a.EmbeddedEtcd = &EmbeddedEtcdConfig{}
			}
			e := a.EmbeddedEtcd
			for nesting := d.Nesting(); d.NextBlock(nesting); {
				var err error
				switch d.Val() {
				case "data_dir":
					err = oneArg(d, &e.DataDir)
				case "client_url":
					err = oneArg(d, &e.ClientURL)
				case "peer_url":
					err = oneArg(d, &e.PeerURL)
				case "prefix":
					err = oneArg(d, &e.Prefix)
				case "quota_backend_bytes":
					var arg string
					if err = oneArg(d, &arg); err == nil {
						if e.QuotaBackendBytes, err = parseSize(arg); err != nil || e.QuotaBackendBytes <= 0 {
							return d.Errf("quota_backend_bytes: must be a positive size (e.g. 2GiB), got %q", arg)
						}
					}
				case "auto_compaction_retention":
					var arg string
					if err = oneArg(d, &arg); err == nil {
						e.AutoCompactionRetention, err = parseDuration(d, "auto_compaction_retention", arg)
					}
				default:
					return d.Errf("unrecognized embedded_etcd option %q", d.Val())
				}
				if err != nil {
					return err
				}
			}
		case "quotas":
			q, err := unmarshalReplicaQuotas(d)
			if err != nil {
				return err
			}
			a.Quotas = q
		case "catalog_history":
			var arg string
			if err := oneArg(d, &arg); err != nil {
				return err
			}
			n, err := strconv.Atoi(arg)
			if err != nil || n < 1 || n > store.MaxCatalogHistory {
				return d.Errf("catalog_history: must be a number of versions from 1 to %d, got %q", store.MaxCatalogHistory, arg)
			}
			a.CatalogHistory = n
		case "tracing": // telemetry.go
			t, err := unmarshalTracing(d)
			if err != nil {
				return err
			}
			a.Tracing = t
		default:
			return d.Errf("unrecognized crank option %q", d.Val())
		}
	}
	if a.Etcd != nil && a.EmbeddedEtcd != nil {
		return d.Err(errBothEtcd.Error())
	}
	return nil
}

func oneArg(d *caddyfile.Dispenser, dst *string) error {
	if !d.AllArgs(dst) {
		return d.ArgErr()
	}
	return nil
}

// parseSize parses a byte size as humanizeBytes does, and also GB and GiB.
func parseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"gib", 1 << 30}, {"gb", 1000 * 1000 * 1000}} {
		if num, ok := strings.CutSuffix(t, u.suffix); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
			if err != nil || n < 0 || n > (1<<62)/u.mult {
				return 0, fmt.Errorf("invalid size %q", s)
			}
			return n * u.mult, nil
		}
	}
	return humanizeBytes(s)
}

func parseDuration(d *caddyfile.Dispenser, option, s string) (caddy.Duration, error) {
	dur, err := caddy.ParseDuration(s)
	if err != nil {
		return 0, d.Errf("%s: invalid duration %s: %v", option, strconv.Quote(s), err)
	}
	if dur <= 0 {
		return 0, d.Errf("%s: must be positive (got %s)", option, strconv.Quote(s))
	}
	return caddy.Duration(dur), nil
}

// Interface guards.
var (
	_ caddyfile.Unmarshaler = (*Handler)(nil)
	_ caddyfile.Unmarshaler = (*App)(nil)
)
