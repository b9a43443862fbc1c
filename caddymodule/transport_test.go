package caddymodule

import (
	"strings"
	"testing"
)

func TestProvisionTransport(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		h         Handler
		err, mode string
	}{
		{Handler{}, "", "stateful"},
		{Handler{Stateless: true}, "", "stateless"},
		{Handler{TransportConfig: TransportConfig{Mode: "stateless"}}, "", "stateless"},
		{Handler{Stateless: true, TransportConfig: TransportConfig{Mode: "stateful"}}, "mode: stateful contradicts stateless", ""},
		{Handler{TransportConfig: TransportConfig{Mode: "sessionless"}}, `mode: must be "stateful" or "stateless", got "sessionless"`, ""},
		{Handler{TransportConfig: TransportConfig{EventStore: "redis"}}, `event_store: must be "etcd" or "off", got "redis"`, ""},
		{Handler{TransportConfig: TransportConfig{HotPath: "off"}}, "", "stateful"},
		{Handler{TransportConfig: TransportConfig{HotPath: "no"}}, `hot_path: must be "on" or "off", got "no"`, ""},
		{Handler{TransportConfig: TransportConfig{EventMaxEvents: -1}}, "event_max_events: must be 0-100000, got -1", ""},
		{Handler{TransportConfig: TransportConfig{EventMaxBytes: 1 << 40}}, "event_max_bytes: must be 0-67108864", ""},
	} {
		err := c.h.provisionTransport()
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%+v: %v", c.h.TransportConfig, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%+v: err = %v, want %q", c.h.TransportConfig, err, c.err)
		case c.err == "" && (c.h.Mode != c.mode || c.h.Stateless != (c.mode == "stateless")):
			t.Errorf("mode %q stateless %v, want %s", c.h.Mode, c.h.Stateless, c.mode)
		}
	}
}

func TestHumanizeBytes(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{"512": 512, "512B": 512, "2KiB": 2048, "1 MiB": 1 << 20, "3kb": 3000, "1MB": 1_000_000} {
		if got, err := humanizeBytes(in); err != nil || got != want {
			t.Errorf("%q: %d %v, want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "-1", "1TB", "1.5MiB", "99999999999999999999"} {
		if _, err := humanizeBytes(in); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}
