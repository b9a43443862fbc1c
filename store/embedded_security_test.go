package store_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// The embedded etcd serves only clients with the client certificate made
// for its data directory: a local process without it — a plain HTTP or
// gRPC client, a TLS client without a certificate or with another CA's —
// can neither read nor write, on the client port or the peer port.
func TestEmbeddedRequiresClientCertificate(t *testing.T) {
	t.Parallel()
	srv := storetest.NewServer(t)
	other := storetest.NewServer(t) // another data directory's credentials
	ctx := ctxT(t)
	st, err := store.NewEtcd(ctx, srv.StoreConfig())
	if err != nil {
		t.Fatalf("with the generated credentials: %v", err)
	}
	defer st.Close()
	if err := st.PutMCPSession(ctx, store.MCPSession{ID: "s", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}

	ep := srv.Endpoints()[0]
	if !strings.HasPrefix(ep, "https://127.0.0.1:") {
		t.Fatalf("endpoint %s is not https on loopback", ep)
	}
	hostport := strings.TrimPrefix(ep, "https://")
	for name, cfg := range map[string]store.EtcdConfig{
		"plain http":                     {Endpoints: []string{"http://" + hostport}},
		"tls without client certificate": {Endpoints: []string{ep}, TLS: &store.TLSConfig{CAFile: srv.TLS().CAFile}},
		"another CA's client certificate": {Endpoints: []string{ep}, TLS: &store.TLSConfig{
			CAFile: srv.TLS().CAFile, CertFile: other.TLS().CertFile, KeyFile: other.TLS().KeyFile}},
	} {
		cfg.DialTimeout = time.Second
		if st, err := store.NewEtcd(ctx, cfg); err == nil {
			_, gerr := st.GetMCPSession(ctx, "s")
			st.Close()
			t.Errorf("%s: connected (read: %v)", name, gerr)
		}
	}

	// The JSON gateway a browser page could reach with a simple request:
	// no plain HTTP answer, and no answer over TLS without a certificate.
	body := `{"key":"` + "L2NyYW5rL3YxL21jcC1zZXNzaW9ucy9z" + `"}`
	if resp, err := http.Post("http://"+hostport+"/v3/kv/range", "text/plain", strings.NewReader(body)); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if bytes.Contains(b, []byte("kvs")) {
			t.Errorf("plain HTTP read the record: %s", b)
		}
	}
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 5 * time.Second}
	if resp, err := insecure.Post(ep+"/v3/kv/range", "application/json", strings.NewReader(body)); err == nil {
		resp.Body.Close()
		t.Errorf("HTTPS without a client certificate got an answer: %s", resp.Status)
	}
	// The peer port refuses a TLS handshake without a certificate too.
	peer := srv.PeerURL()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", strings.TrimPrefix(peer, "https://"),
		&tls.Config{InsecureSkipVerify: true})
	if err == nil {
		// TLS 1.3: the refusal (an alert) arrives after the client's side
		// of the handshake; a server that accepted the client stays
		// silent until the deadline.
		_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
	}
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("peer port %s accepted a TLS client without a certificate (%v)", peer, err)
	}
}

// The credentials are made on the first start (private files in the data
// directory) and reused after; files others may read are refused, missing
// ones are made anew.
func TestEmbeddedCredentialsInDataDir(t *testing.T) {
	t.Parallel()
	srv := storetest.NewServer(t)
	creds := srv.TLS()
	dir := filepath.Dir(creds.CAFile)
	files := []string{creds.CAFile, creds.CertFile, creds.KeyFile, filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("credentials directory %s: %v, %v", dir, fi.Mode(), err)
	}
	before := map[string][]byte{}
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: mode %v, %v; want 0600", f, fi.Mode(), err)
		}
		before[f], _ = os.ReadFile(f)
	}

	srv.Stop()
	srv.Start()
	for _, f := range files {
		if b, _ := os.ReadFile(f); !bytes.Equal(b, before[f]) {
			t.Errorf("%s changed across a restart", f)
		}
	}
	ctx := ctxT(t)
	st, err := store.NewEtcd(ctx, srv.StoreConfig())
	if err != nil {
		t.Fatalf("after a restart, with the same credentials: %v", err)
	}
	st.Close()

	srv.Stop()
	if err := os.Chmod(creds.KeyFile, 0o644); err != nil {
		t.Fatal(err)
	}
	err = srv.TryStart()
	if err == nil || !strings.Contains(err.Error(), creds.KeyFile) || !strings.Contains(err.Error(), "accessible to other users") {
		t.Fatalf("start with a world-readable client key: %v", err)
	}
	if err := os.Remove(creds.KeyFile); err != nil {
		t.Fatal(err)
	}
	srv.Start()
	if b, _ := os.ReadFile(creds.CAFile); bytes.Equal(b, before[creds.CAFile]) {
		t.Error("a missing key did not bring new credentials")
	}
	if st, err := store.NewEtcd(ctx, srv.StoreConfig()); err != nil {
		t.Errorf("with the new credentials: %v", err)
	} else {
		st.Close()
	}
}

// The embedded etcd listens on loopback only; checking a configuration
// (crank validate) writes nothing.
func TestEmbeddedLoopbackOnly(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "etcd")
	for _, cfg := range []store.EmbeddedConfig{
		{DataDir: dir, ClientURL: "https://0.0.0.0:2379"},
		{DataDir: dir, ClientURL: "https://10.0.0.5:2379"},
		{DataDir: dir, ClientURL: "https://etcd.example.com:2379"},
		{DataDir: dir, PeerURL: "http://[::]:2380"},
		{DataDir: dir, PeerURL: "http://192.168.1.2:2380"},
	} {
		err := cfg.Check()
		if err == nil || !strings.Contains(err.Error(), "loopback address only") {
			t.Errorf("Check(%s %s) = %v, want a loopback refusal", cfg.ClientURL, cfg.PeerURL, err)
		}
		if e, err := store.StartEmbedded(cfg); err == nil {
			e.Close()
			t.Errorf("StartEmbedded(%s %s) succeeded", cfg.ClientURL, cfg.PeerURL)
		}
	}
	for _, u := range []string{"https://127.0.0.1:2379", "http://127.0.0.2:2379", "https://localhost:2379", "https://[::1]:2379"} {
		if err := (store.EmbeddedConfig{DataDir: dir, ClientURL: u}).Check(); err != nil {
			t.Errorf("Check(%s): %v", u, err)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Check created %s (%v)", dir, err)
	}
}

// etcd credentials do not cross a network in the clear: a username and
// password with an http:// endpoint are refused unless it is a loopback
// address.
func TestEtcdCredentialsNeedTLS(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		endpoints []string
		ok        bool
	}{
		{[]string{"http://etcd.example.com:2379"}, false},
		{[]string{"http://127.0.0.1:2379", "http://etcd-1:2379"}, false},
		{[]string{"10.0.0.7:2379"}, false},
		{[]string{"http://[2001:db8::1]:2379"}, false},
		{[]string{"https://etcd.example.com:2379"}, true},
		{[]string{"http://127.0.0.1:2379", "http://localhost:2379", "http://[::1]:2379"}, true},
		{[]string{"unix:///run/etcd.sock"}, true},
	} {
		err := store.EtcdConfig{Endpoints: c.endpoints, Username: "crank", Password: "pw"}.Check()
		if c.ok && err != nil {
			t.Errorf("%v: %v", c.endpoints, err)
		}
		if !c.ok && (err == nil || !strings.Contains(err.Error(), "in the clear") || !errors.Is(err, store.ErrInvalid)) {
			t.Errorf("%v: err = %v, want a refusal of clear-text credentials", c.endpoints, err)
		}
		// Without credentials, plain http stays allowed (an operator's
		// choice for a private network).
		if err := (store.EtcdConfig{Endpoints: c.endpoints}).Check(); err != nil {
			t.Errorf("%v without credentials: %v", c.endpoints, err)
		}
	}
}
