package sdk

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"strings"
)

// maxPEMBytes bounds a certificate or key file read by ClientTLS.Load.
const maxPEMBytes = 1 << 20

// ClientTLS is the tls block of an adapter config for connecting to an
// upstream over TLS; declare it in the config struct as
//
//	TLS *sdk.ClientTLS `json:"tls,omitempty" jsonschema:"TLS settings of the upstream connection."`
//
// and turn it into a *tls.Config with Load while preparing the config.
type ClientTLS struct {
	CAFile     string `reach:"file" json:"ca_file,omitempty" jsonschema:"PEM file of the CA certificates that verify the upstream; default: the system roots."`
	CertFile   string `reach:"file" json:"cert_file,omitempty" jsonschema:"PEM client certificate for mutual TLS (with key_file)."`
	KeyFile    string `reach:"file" json:"key_file,omitempty" jsonschema:"PEM private key of the client certificate."`
	ServerName string `json:"server_name,omitempty" jsonschema:"Name to verify the upstream's certificate against; default: the upstream's host."`
}

// Load reads the block's files, relative paths resolved against the
// operations file's directory (op.ResolvePath), into a client TLS config
// (TLS 1.2 at least). Problems are reported at field.ca_file,
// field.cert_file or field.key_file (field is the block's own path, such
// as "tls"), never quoting key material; cfg is nil when there was one.
// fingerprint is a hash of everything loaded, for keying connections that
// must not be shared between different TLS settings.
func (t *ClientTLS) Load(op *Operation, field string, d *Diagnostics) (cfg *tls.Config, fingerprint string) {
	caFile, certFile, keyFile := strings.TrimSpace(t.CAFile), strings.TrimSpace(t.CertFile), strings.TrimSpace(t.KeyFile)
	serverName := strings.TrimSpace(t.ServerName)
	cfg = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	h := sha256.New()
	fmt.Fprintf(h, "sni=%s\x00", serverName)
	ok := true
	if caFile != "" {
		pem, err := ReadFile(op.ResolvePath(caFile), maxPEMBytes)
		switch {
		case err != nil:
			d.Errorf(field+".ca_file", "cannot read %s: %v", caFile, err)
			ok = false
		default:
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				d.Errorf(field+".ca_file", "%s holds no PEM certificate", caFile)
				ok = false
			}
			cfg.RootCAs = pool
			h.Write([]byte("ca\x00"))
			h.Write(pem)
		}
	}
	switch {
	case certFile != "" && keyFile == "":
		d.Errorf(field+".key_file", "required with cert_file (the client certificate's private key)")
		ok = false
	case certFile == "" && keyFile != "":
		d.Errorf(field+".cert_file", "required with key_file (the client certificate)")
		ok = false
	case certFile != "":
		certPEM, err1 := ReadFile(op.ResolvePath(certFile), maxPEMBytes)
		keyPEM, err2 := ReadFile(op.ResolvePath(keyFile), maxPEMBytes)
		if err1 != nil {
			d.Errorf(field+".cert_file", "cannot read %s: %v", certFile, err1)
		}
		if err2 != nil {
			d.Errorf(field+".key_file", "cannot read %s: %v", keyFile, err2)
		}
		if err1 != nil || err2 != nil {
			ok = false
			break
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			// The error text never includes key material.
			d.Errorf(field+".cert_file", "not a usable client certificate and key: %s", strings.TrimPrefix(err.Error(), "tls: "))
			ok = false
			break
		}
		cfg.Certificates = []tls.Certificate{pair}
		h.Write([]byte("cert\x00"))
		h.Write(certPEM)
		h.Write(keyPEM)
	}
	if !ok {
		return nil, ""
	}
	return cfg, hex.EncodeToString(h.Sum(nil))
}
