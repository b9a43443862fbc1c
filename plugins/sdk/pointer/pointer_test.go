package pointer

import (
	"slices"
	"testing"
)

func TestPointer(t *testing.T) {
	t.Parallel()
	for k, want := range map[string]string{"a": "a", "a/b": "a~1b", "~x": "~0x", "a.b": "a.b", "~/": "~0~1"} {
		if got := Key(k); got != want || Unkey(got) != k {
			t.Errorf("Key(%q) = %q (back %q), want %q", k, got, Unkey(got), want)
		}
	}
	if p := Join("/config", "headers", "X.Api/Key"); p != "/config/headers/X.Api~1Key" || !slices.Equal(Split(p), []string{"config", "headers", "X.Api/Key"}) {
		t.Errorf("Join/Split: %q %q", p, Split(p))
	}
	for dotted, want := range map[string]string{"headers[0]": "/headers/0", "paths./users": "/paths/~1users", "stream.max_event_bytes": "/stream/max_event_bytes", "a~b": "/a~0b", "": ""} {
		if got := FromDotted(dotted); got != want {
			t.Errorf("FromDotted(%q) = %q, want %q", dotted, got, want)
		}
	}
}
