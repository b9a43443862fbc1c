package grpcadapter_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crankmcp/crank/plugins/grpc/grpctest"
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
)

// pki is a throw-away CA with a server and a client certificate, written
// as PEM files.
type pki struct {
	dir                          string
	caFile, certFile, keyFile    string // the client's
	otherCA                      string // a CA that signed nothing here
	serverCert                   tls.Certificate
	pool                         *x509.CertPool
	serverCertFile, serverKeyPEM string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir()}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "crank test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	p.pool = x509.NewCertPool()
	p.pool.AddCert(ca)
	p.caFile = p.write(t, "ca.pem", "CERTIFICATE", caDER)

	issue := func(name string, usage x509.ExtKeyUsage, serial int64) ([]byte, *ecdsa.PrivateKey) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			DNSNames: []string{"localhost", "api.test"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, key
	}
	srvDER, srvKey := issue("server", x509.ExtKeyUsageServerAuth, 2)
	p.serverCert = tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}
	cliDER, cliKey := issue("client", x509.ExtKeyUsageClientAuth, 3)
	p.certFile = p.write(t, "client.pem", "CERTIFICATE", cliDER)
	keyDER, _ := x509.MarshalECPrivateKey(cliKey)
	p.keyFile = p.write(t, "client.key", "EC PRIVATE KEY", keyDER)

	otherKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	otherDER, _ := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &otherKey.PublicKey, otherKey)
	p.otherCA = p.write(t, "other-ca.pem", "CERTIFICATE", otherDER)
	return p
}

func (p *pki) write(t *testing.T, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestTLS(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	tlsSrv := startTestServer(t, grpctest.Options{Reflection: grpctest.ReflectionBoth,
		TLS: &tls.Config{Certificates: []tls.Certificate{p.serverCert}, MinVersion: tls.VersionTLS12}})
	mtlsSrv := startTestServer(t, grpctest.Options{Reflection: grpctest.ReflectionBoth,
		TLS: &tls.Config{Certificates: []tls.Certificate{p.serverCert}, ClientCAs: p.pool,
			ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}})
	plainSrv := startTestServer(t, grpctest.Options{Reflection: grpctest.ReflectionBoth})
	h := newHarness(t)

	ok := func(name string, cfg map[string]any) {
		t.Run(name, func(t *testing.T) {
			if tools := expandTools(t, h, adaptertest.Call{Config: cfg}); len(tools) != 1 {
				t.Fatalf("tools = %v", tools)
			}
			if got := invokeOK(t, h, adaptertest.Call{Config: cfg, Args: `{"text":"over tls"}`}); got["text"] != "over tls" {
				t.Errorf("answer = %v", got)
			}
		})
	}
	fails := func(name string, cfg map[string]any, want ...string) {
		t.Run(name, func(t *testing.T) {
			ue := invokeErr(t, h, adaptertest.Call{Config: cfg, Args: `{}`})
			if ue.Kind != sdk.KindTransport && ue.Kind != sdk.KindUpstreamStatus {
				t.Errorf("error = %+v", ue)
			}
			wantContains(t, "message", ue.Message, want...)
		})
	}
	set := writeDescriptorSet(t, t.TempDir())

	ok("custom CA", tlsSrv.cfg("Echo", "tls", map[string]any{"ca_file": p.caFile}))
	ok("server name", tlsSrv.cfg("Echo", "tls", map[string]any{"ca_file": p.caFile, "server_name": "api.test"}))
	ok("mutual TLS", mtlsSrv.cfg("Echo", "tls", map[string]any{"ca_file": p.caFile, "cert_file": p.certFile, "key_file": p.keyFile}))
	ok("plaintext loopback by default", plainSrv.cfg("Echo"))

	fails("system roots refuse a private CA", tlsSrv.cfg("Echo", "plaintext", false, "descriptor_set", set),
		"TLS handshake with "+tlsSrv.addr+" failed", "certificate signed by unknown authority")
	fails("another CA", tlsSrv.cfg("Echo", "tls", map[string]any{"ca_file": p.otherCA}, "descriptor_set", set),
		"TLS handshake", "failed")
	fails("wrong server name", tlsSrv.cfg("Echo", "tls", map[string]any{"ca_file": p.caFile, "server_name": "evil.test"}, "descriptor_set", set),
		"TLS handshake", "evil.test")
	t.Run("mTLS without a client certificate", func(t *testing.T) {
		// With TLS 1.3 the server refuses the missing certificate after
		// the client's handshake is done: the client sees the alert or a
		// reset, whichever comes first.
		ue := invokeErr(t, h, adaptertest.Call{Config: mtlsSrv.cfg("Echo", "tls", map[string]any{"ca_file": p.caFile}, "descriptor_set", set), Args: `{}`})
		msg := ue.Message
		if ue.Kind != sdk.KindTransport || !strings.Contains(msg, "UNAVAILABLE") || !strings.Contains(msg, mtlsSrv.addr) ||
			!strings.Contains(msg, "certificate required") && !strings.Contains(msg, "closed by the server") {
			t.Errorf("error = %+v", ue)
		}
	})
	fails("plaintext to a TLS server", tlsSrv.cfg("Echo", "plaintext", true, "descriptor_set", set),
		"UNAVAILABLE: the connection to "+tlsSrv.addr+" closed during the HTTP/2 handshake (does the server expect TLS?")
	fails("TLS to a plaintext server", plainSrv.cfg("Echo", "tls", map[string]any{"ca_file": p.caFile}, "descriptor_set", set),
		"the server does not speak TLS (set plaintext: true)")

	t.Run("bad key material", func(t *testing.T) {
		diags, err := h.Validate(ctxT(t), adaptertest.Call{Config: tlsSrv.cfg("Echo", "tls", map[string]any{"cert_file": p.certFile, "key_file": p.caFile})})
		if err != nil {
			t.Fatal(err)
		}
		wantDiag(t, diags, "tls.cert_file", "not a usable client certificate and key")
		diags, _ = h.Validate(ctxT(t), adaptertest.Call{Config: tlsSrv.cfg("Echo", "tls", map[string]any{"ca_file": p.keyFile})})
		wantDiag(t, diags, "tls.ca_file", "holds no PEM certificate")
	})
}
