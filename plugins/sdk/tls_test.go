package sdk_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crankmcp/crank/plugins/sdk"
)

func TestClientTLS(t *testing.T) {
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	write("key.pem", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	write("junk.pem", []byte("not pem"))
	op := &sdk.Operation{BaseDir: dir}

	var d sdk.Diagnostics
	cfg, fp := (&sdk.ClientTLS{CAFile: "ca.pem", CertFile: "ca.pem", KeyFile: "key.pem", ServerName: "api"}).Load(op, "tls", &d)
	if d.Failed() || cfg == nil || cfg.RootCAs == nil || len(cfg.Certificates) != 1 || cfg.ServerName != "api" || fp == "" {
		t.Fatalf("good block: %+v %q %v", cfg, fp, d.List())
	}
	_, other := (&sdk.ClientTLS{CAFile: "ca.pem", CertFile: "ca.pem", KeyFile: "key.pem", ServerName: "other"}).Load(op, "tls", &d)
	if other == fp {
		t.Error("the fingerprint does not follow server_name")
	}

	for _, c := range []struct {
		block       sdk.ClientTLS
		field, want string
	}{
		{sdk.ClientTLS{CAFile: "missing.pem"}, "upstream.tls.ca_file", "cannot read missing.pem: no such file or directory"},
		{sdk.ClientTLS{CAFile: "junk.pem"}, "upstream.tls.ca_file", "junk.pem holds no PEM certificate"},
		{sdk.ClientTLS{CertFile: "ca.pem"}, "upstream.tls.key_file", "required with cert_file"},
		{sdk.ClientTLS{KeyFile: "key.pem"}, "upstream.tls.cert_file", "required with key_file"},
		{sdk.ClientTLS{CertFile: "ca.pem", KeyFile: "junk.pem"}, "upstream.tls.cert_file", "not a usable client certificate and key"},
	} {
		var d sdk.Diagnostics
		cfg, _ := c.block.Load(op, "upstream.tls", &d)
		list := d.List()
		if cfg != nil || len(list) != 1 || list[0].Field != c.field || !strings.Contains(list[0].Message, c.want) {
			t.Errorf("%+v: cfg %v, diagnostics %+v, want %s: %s", c.block, cfg != nil, list, c.field, c.want)
		}
		if strings.Contains(list[0].Message, "PRIVATE KEY") {
			t.Errorf("%+v: the message quotes key material: %s", c.block, list[0].Message)
		}
	}
}
