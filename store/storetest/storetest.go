// Package storetest starts real etcd servers for tests of packages that use
// the store package.
package storetest

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/crankmcp/crank/store"
)

// Embedded starts a single-member etcd server in t.TempDir() on free
// loopback ports (fsync disabled, logs discarded) and an Etcd store
// connected to it under store.DefaultPrefix. Both are closed when the test
// ends. It fails the test if etcd cannot be started. Safe for parallel tests:
// each call gets its own server.
func Embedded(t testing.TB) (*store.Embedded, *store.Etcd) {
	t.Helper()
	dir := t.TempDir()
	var (
		emb *store.Embedded
		err error
	)
	// Free ports are found by binding to :0 and releasing them, so another
	// process may grab one before etcd binds it: retry on such a clash.
	for attempt := 0; attempt < 5; attempt++ {
		ports, perr := FreePorts(2)
		if perr != nil {
			t.Fatalf("storetest: %v", perr)
		}
		emb, err = store.StartEmbedded(store.EmbeddedConfig{
			DataDir:       fmt.Sprintf("%s/etcd-%d", dir, attempt),
			ClientURL:     fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
			PeerURL:       fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
			UnsafeNoFsync: true,
			StartTimeout:  30 * time.Second,
		})
		if err == nil || !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(func() { _ = emb.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := store.NewEtcd(ctx, store.EtcdConfig{
		Endpoints:   emb.Endpoints(),
		DialTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return emb, st
}

// FreePorts returns n distinct TCP ports on 127.0.0.1 that were free a
// moment ago.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
