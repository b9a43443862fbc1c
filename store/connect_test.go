package store_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

func TestNewEtcdUnreachable(t *testing.T) {
	t.Parallel()
	ports, err := storetest.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	ep := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	for _, tc := range []struct{ name, user, pass string }{
		{"anonymous", "", ""},
		{"auth", "crank", "secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const timeout = time.Second
			start := time.Now()
			st, err := store.NewEtcd(context.Background(), store.EtcdConfig{
				Endpoints:   []string{ep},
				DialTimeout: timeout,
				Username:    tc.user,
				Password:    tc.pass,
			})
			took := time.Since(start)
			if err == nil {
				st.Close()
				t.Fatal("NewEtcd to a closed port succeeded")
			}
			t.Logf("error after %s: %v", took, err)
			if !strings.Contains(err.Error(), ep) {
				t.Errorf("error does not name the endpoint %s: %v", ep, err)
			}
			if took > timeout+3*time.Second {
				t.Errorf("NewEtcd took %s with DialTimeout %s", took, timeout)
			}
		})
	}
}

func TestNewEtcdContextCanceled(t *testing.T) {
	t.Parallel()
	ports, err := storetest.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = store.NewEtcd(ctx, store.EtcdConfig{
		Endpoints:   []string{fmt.Sprintf("http://127.0.0.1:%d", ports[0])},
		DialTimeout: time.Minute,
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestNewEtcdConfigErrors(t *testing.T) {
	t.Parallel()
	if _, err := store.NewEtcd(context.Background(), store.EtcdConfig{}); err == nil {
		t.Error("no endpoints: no error")
	}
	if _, err := store.NewEtcd(context.Background(), store.EtcdConfig{Endpoints: []string{"http://127.0.0.1:1"}, Username: "u"}); err == nil {
		t.Error("username without password: no error")
	}
}

func TestPingAfterServerStops(t *testing.T) {
	t.Parallel()
	emb, st := storetest.Embedded(t)
	if err := st.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	emb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	if err := st.Ping(ctx); err == nil {
		t.Fatal("Ping succeeded with the server stopped")
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("Ping took %s", took)
	}
}

func TestEmbeddedClientPortInUse(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ports, err := storetest.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	clientURL := "http://" + l.Addr().String()
	start := time.Now()
	e, err := store.StartEmbedded(store.EmbeddedConfig{
		DataDir:       t.TempDir(),
		ClientURL:     clientURL,
		PeerURL:       fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
		UnsafeNoFsync: true,
		StartTimeout:  10 * time.Second,
	})
	if err == nil {
		e.Close()
		t.Fatal("StartEmbedded on a used client port succeeded")
	}
	t.Logf("error after %s: %v", time.Since(start), err)
	if !strings.Contains(err.Error(), "address already in use") || !strings.Contains(err.Error(), clientURL) || !strings.Contains(err.Error(), "second `make run`") {
		t.Errorf("unclear error: %v", err)
	}
}

func TestEmbeddedBadDataDir(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ports, err := storetest.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(file, "etcd") // below a regular file
	e, err := store.StartEmbedded(store.EmbeddedConfig{
		DataDir:      dataDir,
		ClientURL:    fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
		PeerURL:      fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		StartTimeout: 10 * time.Second,
	})
	if err == nil {
		e.Close()
		t.Fatal("StartEmbedded with an unusable data dir succeeded")
	}
	t.Logf("error: %v", err)
	if !strings.Contains(err.Error(), dataDir) {
		t.Errorf("error does not name the data dir: %v", err)
	}
}

func TestEmbeddedConfigErrors(t *testing.T) {
	t.Parallel()
	for _, cfg := range []store.EmbeddedConfig{
		{},
		{DataDir: t.TempDir(), ClientURL: "ftp://127.0.0.1:1"},
		{DataDir: t.TempDir(), ClientURL: "http://127.0.0.1"},
		{DataDir: t.TempDir(), PeerURL: "http://127.0.0.1:1/x"},
	} {
		if e, err := store.StartEmbedded(cfg); err == nil {
			e.Close()
			t.Errorf("StartEmbedded(%+v) succeeded", cfg)
		} else {
			t.Logf("%v", err)
		}
	}
}

func TestEmbeddedRestartKeepsData(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ports, err := storetest.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	cfg := store.EmbeddedConfig{
		DataDir:      dir,
		ClientURL:    fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
		PeerURL:      fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		StartTimeout: 20 * time.Second,
	}
	ctx := ctxT(t)
	open := func() (*store.Embedded, *store.Etcd) {
		e, err := store.StartEmbedded(cfg)
		if err != nil {
			t.Fatal(err)
		}
		scfg := e.StoreConfig()
		scfg.DialTimeout = 5 * time.Second
		st, err := store.NewEtcd(ctx, scfg)
		if err != nil {
			e.Close()
			t.Fatal(err)
		}
		return e, st
	}
	e, st := open()
	if err := st.PutMCPSession(ctx, store.MCPSession{ID: "keep", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	e.Close()
	e.Close() // idempotent

	e, st = open()
	defer e.Close()
	defer st.Close()
	if _, err := st.GetMCPSession(ctx, "keep"); err != nil {
		t.Fatalf("session lost across restart: %v", err)
	}
}
