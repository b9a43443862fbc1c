package caddymodule

import (
	"os"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/configblock"
)

// How a handler loads its entries: on_load_error (host.LoadConfig,
// declared once there), and the load `crank validate` runs.
//
// Caddy's validate command (`crank validate`, `caddy validate`)
// provisions the config and stops: no app starts, so no etcd opens, no
// port is bound and, without more, no adapter would run. Provision stays
// free of side effects for every other command (run, reload, adapt);
// under validate each crank handler runs what the crank app's Start
// would, short of serving (checkLoad): its adapters started, each entry
// checked and expanded (documents read, schemas parsed, reflection and
// introspection tried), an entry that cannot load an error whatever
// on_load_error says, and the adapters stopped before Provision returns.

// unmarshalLoad reads a Caddyfile subdirective of host.LoadConfig
// (on_load_error <retry|fail>); ok says whether it was one.
func (h *Handler) unmarshalLoad(d *caddyfile.Dispenser) (ok bool, err error) {
	name := d.Val()
	for _, f := range configblock.Fields[host.LoadConfig]() {
		if f.Name != name {
			continue
		}
		if err := configblock.Set(&h.LoadConfig, name, d.RemainingArgs()); err != nil {
			return true, d.Err(err.Error())
		}
		if err := configblock.CheckEnums(&h.LoadConfig); err != nil {
			return true, d.Err(err.Error())
		}
		return true, nil
	}
	return false, nil
}

// validating reports whether this process runs Caddy's validate command.
var validating = sync.OnceValue(func() bool { return caddyCommand(os.Args) == "validate" })

// caddyCommand is the Caddy subcommand of a command line: its first
// argument that is not a flag.
func caddyCommand(args []string) string {
	for _, a := range args[min(1, len(args)):] {
		if !strings.HasPrefix(a, "-") {
			return a
		}
	}
	return ""
}

// checkLoad loads the handler's operations files as the crank app's Start
// would, with adapter processes of its own (stopped before it returns)
// and no store: every entry's problem, one that cannot load included,
// is an error naming its file, line, entry and field. A catalog's
// entries are in etcd, which validate does not open: they are not
// checked.
func (h *Handler) checkLoad() error {
	sups := map[string]*host.Supervisor{}
	var mu sync.Mutex
	defer func() {
		for _, s := range sups {
			_ = s.Close()
		}
	}()
	adapter := func(name string) (*host.Supervisor, error) {
		spec, err := host.AdapterSpecOf(h.cat, name, builtinSpec)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		if s := sups[spec.Key()]; s != nil {
			return s, nil
		}
		s := host.NewSupervisor(spec, host.SupervisorOptions{Logger: caddy.Log().Named("crank.adapter"), HostVersion: Version, HealthInterval: -1})
		sups[spec.Key()] = s
		return s, nil
	}
	hst, err := host.Check(h.ctx, host.Options{File: h.cat, Logger: h.logger, Adapter: adapter, Endpoint: h.endpointName()})
	if err != nil {
		return err
	}
	return h.ep.CheckView(hst) // view.go
}
