package caddymodule

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/crankmcp/crank/store"
)

// Transport modes.
const (
	modeStateful  = "stateful"
	modeStateless = "stateless"
)

// What a stateful endpoint does with a session-less legacy call.
const (
	sessionlessAllow  = "allow"
	sessionlessRefuse = "refuse"
)

// Transport defaults.
const (
	// DefaultKeepaliveInterval is how long an SSE stream may stay silent
	// before it gets a keep-alive comment.
	DefaultKeepaliveInterval = 15 * time.Second
	// DefaultEventTTL is how long a stored SSE event can be replayed.
	DefaultEventTTL = 5 * time.Minute
)

// TransportConfig holds the MCP transport options of a handler (its JSON
// fields are the handler's own).
type TransportConfig struct {
	// Mode is "stateful" (the default: both protocol generations on one
	// URL, MCP sessions with Mcp-Session-Id, a GET stream and resumable
	// SSE streams for 2025-11-25 and earlier, the sessionless 2026-07-28
	// protocol beside them) or "stateless" (no sessions for either
	// generation, for fleets behind a load balancer). The stateless flag
	// is the same as mode stateless.
	Mode string `json:"mode,omitempty"`
	// SessionlessLegacy is what a stateful endpoint does with a
	// session-less legacy call (a POST with no Mcp-Session-Id and no
	// 2026-07-28 MCP-Protocol-Version whose method is not initialize, as
	// mcp-mesh's meshctl sends): "allow" (the default) serves it as a
	// one-shot stateless call, "refuse" answers 400.
	SessionlessLegacy string `json:"sessionless_legacy,omitempty"`
	// HotPath is "on" (the default: a plain unary tools/call is served
	// without go-sdk's transport, host/mcpserver/hotpath.go) or "off"
	// (go-sdk's handler serves every request; the answers are the same,
	// byte for byte, each call costs more).
	HotPath string `json:"hot_path,omitempty"`
	// KeepaliveInterval: an SSE stream silent for this long gets an SSE
	// comment line, so that idle streams survive write timeouts and
	// proxies. Default 15s; negative turns keep-alives off.
	KeepaliveInterval caddy.Duration `json:"keepalive_interval,omitempty"`
	// EventStore is where stateful mode keeps SSE events for clients that
	// resume a dropped stream with Last-Event-ID: "etcd" (the default: the
	// crank app's store, so any replica can replay them) or "off" (no
	// event ids, no resumption).
	EventStore string `json:"event_store,omitempty"`
	// EventMaxEvents and EventMaxBytes bound each stream's stored events
	// (defaults 1000 and 1 MiB).
	EventMaxEvents int   `json:"event_max_events,omitempty"`
	EventMaxBytes  int64 `json:"event_max_bytes,omitempty"`
	// EventTTL is how long a stored event can be replayed: the time a
	// client has to reconnect. Default 5m, at most the session timeout.
	EventTTL caddy.Duration `json:"event_ttl,omitempty"`
}

// provisionTransport checks the transport options and settles the mode.
func (h *Handler) provisionTransport() error {
	t := &h.TransportConfig
	switch t.Mode {
	case "":
		t.Mode = modeStateful
		if h.Stateless {
			t.Mode = modeStateless
		}
	case modeStateful:
		if h.Stateless {
			return errors.New("crank: mode: stateful contradicts stateless")
		}
	case modeStateless:
		h.Stateless = true
	default:
		return fmt.Errorf("crank: mode: must be %q or %q, got %q", modeStateful, modeStateless, t.Mode)
	}
	switch t.SessionlessLegacy {
	case "", sessionlessAllow:
	case sessionlessRefuse:
		if h.Stateless {
			return errors.New("crank: sessionless_legacy: refuse needs a stateful endpoint (a stateless one serves every request without a session)")
		}
	default:
		return fmt.Errorf("crank: sessionless_legacy: must be %q or %q, got %q", sessionlessAllow, sessionlessRefuse, t.SessionlessLegacy)
	}
	switch t.HotPath {
	case "", "on", "off":
	default:
		return fmt.Errorf("crank: hot_path: must be \"on\" or \"off\", got %q", t.HotPath)
	}
	switch t.EventStore {
	case "", "etcd", "off":
	default:
		return fmt.Errorf("crank: event_store: must be \"etcd\" or \"off\", got %q", t.EventStore)
	}
	if t.EventMaxEvents < 0 || t.EventMaxEvents > store.MaxEventLogEvents {
		return fmt.Errorf("crank: event_max_events: must be 0-%d, got %d", store.MaxEventLogEvents, t.EventMaxEvents)
	}
	if t.EventTTL < 0 {
		return fmt.Errorf("crank: event_ttl: must be positive (got %s)", time.Duration(t.EventTTL))
	}
	if t.EventMaxBytes < 0 || t.EventMaxBytes > store.MaxEventLogBytes {
		return fmt.Errorf("crank: event_max_bytes: must be 0-%d, got %d", store.MaxEventLogBytes, t.EventMaxBytes)
	}
	return nil
}

// keepalive returns the keep-alive interval in effect (0: none).
func (t *TransportConfig) keepalive() time.Duration {
	switch {
	case t.KeepaliveInterval < 0:
		return 0
	case t.KeepaliveInterval == 0:
		return DefaultKeepaliveInterval
	}
	return time.Duration(t.KeepaliveInterval)
}

// UnmarshalCaddyfile reads one transport subdirective of the crank block
// and reports whether it was one. Syntax:
//
//	mode               stateful|stateless
//	sessionless_legacy allow|refuse
//	hot_path           on|off
//	keepalive_interval <duration>|off
//	event_store        etcd|off
//	event_max_events   <n>
//	event_max_bytes    <size>
//	event_ttl          <duration>
func (t *TransportConfig) unmarshalCaddyfile(d *caddyfile.Dispenser) (bool, error) {
	opt := d.Val()
	var arg string
	switch opt {
	case "mode", "sessionless_legacy", "hot_path", "keepalive_interval", "event_store", "event_max_events", "event_max_bytes", "event_ttl":
		if err := oneArg(d, &arg); err != nil {
			return true, err
		}
	default:
		return false, nil
	}
	switch opt {
	case "mode":
		if arg != modeStateful && arg != modeStateless {
			return true, d.Errf("mode: must be stateful or stateless, got %q", arg)
		}
		t.Mode = arg
	case "sessionless_legacy":
		if arg != sessionlessAllow && arg != sessionlessRefuse {
			return true, d.Errf("sessionless_legacy: must be allow or refuse, got %q", arg)
		}
		t.SessionlessLegacy = arg
	case "hot_path":
		if arg != "on" && arg != "off" {
			return true, d.Errf("hot_path: must be on or off, got %q", arg)
		}
		t.HotPath = arg
	case "keepalive_interval":
		if arg == "off" {
			t.KeepaliveInterval = -1
			return true, nil
		}
		dur, err := parseDuration(d, opt, arg)
		if err != nil {
			return true, err
		}
		t.KeepaliveInterval = dur
	case "event_ttl":
		dur, err := parseDuration(d, opt, arg)
		if err != nil {
			return true, err
		}
		t.EventTTL = dur
	case "event_store":
		if arg != "etcd" && arg != "off" {
			return true, d.Errf("event_store: must be etcd or off, got %q", arg)
		}
		t.EventStore = arg
	case "event_max_events":
		n, err := strconv.Atoi(arg)
		if err != nil || n <= 0 || n > store.MaxEventLogEvents {
			return true, d.Errf("event_max_events: must be a whole number 1-%d, got %q", store.MaxEventLogEvents, arg)
		}
		t.EventMaxEvents = n
	case "event_max_bytes":
		size, err := humanizeBytes(arg)
		if err != nil || size <= 0 || size > store.MaxEventLogBytes {
			return true, d.Errf("event_max_bytes: must be a size of 1 byte to %d bytes (e.g. 512KiB), got %q", store.MaxEventLogBytes, arg)
		}
		t.EventMaxBytes = size
	}
	return true, nil
}

// humanizeBytes parses a byte size: a whole number with an optional unit
// (B, KB, KiB, MB, MiB; case-insensitive).
func humanizeBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"kib", 1 << 10}, {"mib", 1 << 20}, {"kb", 1000}, {"mb", 1000 * 1000}, {"b", 1}}
	num, mult := strings.ToLower(strings.TrimSpace(s)), int64(1)
	for _, u := range units {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	return n * mult, nil
}
