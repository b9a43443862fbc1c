package host_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crankmcp/crank/host"
)

// One entry that cannot load is one bad entry: under LoadRetry the host
// serves the others, reports it (FailedEntries) and, once watched, loads
// it again until it loads, then serves its tools too; a load that gives
// a tool another entry has keeps it failed, naming the tool. Under
// LoadFail, and in Check, it fails the load naming file, entry and reason.
func TestEntryLoadRetry(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "tools")
	yaml := fileEntryBetween(file)
	for _, policy := range []host.LoadPolicy{"", host.LoadFail} {
		_, err := newFixtureWith(t, yaml, host.SupervisorOptions{HealthInterval: -1}, func(o *host.Options) { o.OnLoadError = policy })
		if err == nil || !strings.Contains(err.Error(), `ops.yaml:13: operation "files": /config/file: `) || !strings.Contains(err.Error(), "no such file") {
			t.Errorf("policy %q: %v", policy, err)
		}
	}
	var checked error
	f, err := newFixtureWith(t, yaml, host.SupervisorOptions{HealthInterval: -1}, func(o *host.Options) {
		o.OnLoadError = host.LoadRetry
		oo := *o
		oo.OnLoadError = host.LoadRetry
		_, checked = host.Check(context.Background(), oo)
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == nil || !strings.Contains(checked.Error(), `operation "files"`) {
		t.Errorf("Check: %v", checked)
	}
	names := func() string {
		var out []string
		for _, op := range f.h.Operations() {
			out = append(out, op.Name)
		}
		return strings.Join(out, " ")
	}
	if got := names(); got != "first last" {
		t.Fatalf("serves %q", got)
	}
	failed := f.h.FailedEntries()
	if len(failed) != 1 || failed[0].Entry != "files" || failed[0].Attempts != 1 || failed[0].File != "ops.yaml" ||
		!strings.HasPrefix(failed[0].Error, "/config/file: ") || !strings.Contains(failed[0].Error, "no such file") {
		t.Fatalf("failed entries: %+v", failed)
	}
	if res := call(t, f.h, "first", `{}`); res.IsError {
		t.Errorf("first: %s", res.Text)
	}

	// A load that would publish another entry's tool keeps it failed.
	if err := os.WriteFile(file, []byte("first"), 0o600); err != nil {
		t.Fatal(err)
	}
	changed := make(chan struct{}, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.h.Watch(ctx, func() { changed <- struct{}{} })
	waitFor(t, func() bool {
		fs := f.h.FailedEntries()
		return len(fs) == 1 && fs[0].Attempts > 1 && strings.Contains(fs[0].Error, "duplicate tool name")
	})
	if f.h.FailedEntries()[0].NextAttempt.IsZero() {
		t.Error("a watched host's failed entry has no next attempt")
	}

	if err := os.WriteFile(file, []byte("a b"), 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatalf("the entry did not load: %+v", f.h.FailedEntries())
	}
	if got := names(); got != "first last a b" {
		t.Errorf("serves %q", got)
	}
	if fs := f.h.FailedEntries(); len(fs) != 0 {
		t.Errorf("failed entries: %+v", fs)
	}
	if res := call(t, f.h, "a", `{}`); res.IsError {
		t.Errorf("a: %s", res.Text)
	}
}
