package store

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// pki writes a CA and leaf certificates signed by it into dir.
type pki struct {
	dir    string
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caFile string
}

func newPKI(t *testing.T, dir, name string) *pki {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	p := &pki{dir: dir, ca: ca, caKey: key, caFile: filepath.Join(dir, name+"-ca.pem")}
	writePEM(t, p.caFile, "CERTIFICATE", der)
	return p
}

// leaf issues a certificate for 127.0.0.1 usable by servers and clients and
// returns its cert and key files.
func (p *pki) leaf(t *testing.T, name string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(p.dir, name+".pem"), filepath.Join(p.dir, name+"-key.pem")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", kder)
	return certFile, keyFile
}

func writePEM(t *testing.T, file, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// An external cluster that requires TLS client certificates: the store
// connects with the CA, cert and key from TLSConfig, and refuses or fails
// clearly without them.
func TestExternalEtcdTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := newPKI(t, dir, "etcd")
	srvCert, srvKey := p.leaf(t, "server")
	cliCert, cliKey := p.leaf(t, "client")
	other := newPKI(t, dir, "other")

	ports := freePorts(t, 2)
	curl, _ := url.Parse(fmt.Sprintf("https://127.0.0.1:%d", ports[0]))
	purl, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", ports[1]))
	cfg := embed.NewConfig()
	cfg.Dir = filepath.Join(dir, "data")
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*curl}, []url.URL{*curl}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*purl}, []url.URL{*purl}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.UnsafeNoFsync = true
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.ClientTLSInfo.CertFile, cfg.ClientTLSInfo.KeyFile = srvCert, srvKey
	cfg.ClientTLSInfo.TrustedCAFile, cfg.ClientTLSInfo.ClientCertAuth = p.caFile, true
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("TLS etcd not ready")
	}
	ep := []string{curl.String()}
	ctx := context.Background()

	st, err := NewEtcd(ctx, EtcdConfig{Endpoints: ep, DialTimeout: 10 * time.Second,
		TLS: &TLSConfig{CAFile: p.caFile, CertFile: cliCert, KeyFile: cliKey}})
	if err != nil {
		t.Fatalf("connect with TLS: %v", err)
	}
	defer st.Close()
	s, err := st.CreateStreamSession(ctx, NewStreamSession{Scope: Scope{WorkspaceID: "w"}, OperationID: "op", IdleTimeout: time.Minute, MaxLifetime: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetStreamSession(ctx, Scope{WorkspaceID: "w"}, s.ID); err != nil {
		t.Fatal(err)
	}

	// Failing configurations fail at NewEtcd, naming what is wrong.
	for name, tc := range map[string]struct {
		tls  *TLSConfig
		eps  []string
		want string
	}{
		"no client certificate": {&TLSConfig{CAFile: p.caFile}, ep, "not reachable"},
		"untrusted server":      {&TLSConfig{CAFile: other.caFile, CertFile: cliCert, KeyFile: cliKey}, ep, "not reachable"},
		"missing CA file":       {&TLSConfig{CAFile: filepath.Join(dir, "nope.pem")}, ep, "tls: ca"},
		"CA file not PEM":       {&TLSConfig{CAFile: cliKey + ".x"}, ep, "tls: ca"},
		"cert without key":      {&TLSConfig{CertFile: cliCert}, ep, "cert and key"},
		"key does not match":    {&TLSConfig{CertFile: cliCert, KeyFile: srvKey}, ep, "tls: cert/key"},
		"TLS with http":         {&TLSConfig{CAFile: p.caFile}, []string{"http://127.0.0.1:1"}, "plain http"},
		"bad scheme":            {nil, []string{"ftp://127.0.0.1:1"}, "scheme"},
	} {
		if name == "CA file not PEM" {
			if err := os.WriteFile(cliKey+".x", []byte("not pem"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		st, err := NewEtcd(ctx, EtcdConfig{Endpoints: tc.eps, DialTimeout: 2 * time.Second, TLS: tc.tls})
		if err == nil {
			st.Close()
			t.Errorf("%s: connected", name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v (want %q)", name, err, tc.want)
		}
		if strings.Contains(err.Error(), "PRIVATE KEY") {
			t.Errorf("%s: error shows key material: %v", name, err)
		}
	}
	if _, err := NewEtcd(ctx, EtcdConfig{Endpoints: ep, OwnerTTL: 1500 * time.Millisecond}); !errors.Is(err, ErrInvalid) {
		t.Errorf("owner TTL below the minimum: %v", err)
	}
}
