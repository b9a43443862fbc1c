package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// A normal start, use and Close of the embedded etcd logs nothing at
// error level, and nothing about its listeners closing.
func TestEmbeddedQuietShutdown(t *testing.T) {
	t.Parallel()
	ports, err := storetest.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	e, err := store.StartEmbedded(store.EmbeddedConfig{
		DataDir:       t.TempDir(),
		ClientURL:     fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
		PeerURL:       fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		UnsafeNoFsync: true,
		Logger:        zap.New(core),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := store.NewEtcd(ctx, e.StoreConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetMCPSession(ctx, "absent"); err == nil {
		t.Error("an absent session was found")
	}
	s.Close()
	e.Close()
	for _, l := range logs.All() {
		if l.Level >= zapcore.ErrorLevel || closedListenerLine(l) {
			t.Errorf("logged on a normal shutdown: %s %s %v", l.Level, l.Message, l.ContextMap())
		}
	}
}

func closedListenerLine(l observer.LoggedEntry) bool {
	s := fmt.Sprint(l.ContextMap())
	return l.Level >= zapcore.WarnLevel && (strings.Contains(s, "use of closed network connection") || strings.Contains(s, "Server closed"))
}
