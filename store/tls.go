package store

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"strings"
)

// TLSConfig secures the connection to an external etcd cluster (https://
// endpoints). File contents are read when the store is opened.
type TLSConfig struct {
	// CAFile is a PEM bundle of the CAs that sign the etcd servers'
	// certificates; the system roots when empty.
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and its key, for
	// clusters that require client certificates (--client-cert-auth). Set
	// both or neither.
	CertFile, KeyFile string
	// ServerName overrides the name verified in the servers' certificates
	// (by default the endpoint's host).
	ServerName string
}

// build returns the client TLS configuration for endpoints: nil for
// http:// endpoints without TLS settings. TLS settings with an http://
// endpoint are refused, since the credentials and data would travel in the
// clear.
func (c *TLSConfig) build(endpoints []string) (*tls.Config, error) {
	var https, http []string
	for _, ep := range endpoints {
		if !strings.Contains(ep, "://") {
			http = append(http, ep) // host:port, as etcd's client accepts it
			continue
		}
		u, err := url.Parse(ep)
		if err != nil || (u.Host == "" && strings.HasPrefix(u.Scheme, "http")) {
			return nil, fmt.Errorf("store: %w: endpoint %q is not a URL like http://host:2379", ErrInvalid, ep)
		}
		switch u.Scheme {
		case "https", "unixs":
			https = append(https, ep)
		case "http", "unix":
			http = append(http, ep)
		default:
			return nil, fmt.Errorf("store: %w: endpoint %q: scheme must be http or https", ErrInvalid, ep)
		}
	}
	if c == nil {
		if len(https) == 0 {
			return nil, nil
		}
		c = &TLSConfig{}
	}
	if len(http) > 0 {
		return nil, fmt.Errorf("store: %w: tls is configured but endpoint %s is plain http (use https://)", ErrInvalid, strings.Join(http, ", "))
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("store: tls: ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("store: tls: ca: %s holds no PEM certificate", c.CAFile)
		}
		cfg.RootCAs = pool
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return nil, fmt.Errorf("store: %w: tls: cert and key must be set together", ErrInvalid)
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			// The error names the files, never their contents.
			return nil, fmt.Errorf("store: tls: cert/key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
