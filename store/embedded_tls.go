package store

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// The embedded etcd's credentials: a CA made for one data directory, a
// server certificate (for its client and peer listeners) and a client
// certificate, all in <data dir>/crank-tls. The etcd requires a client
// certificate signed by that CA on both listeners, so only a process that
// can read the data directory can talk to it — not other local users,
// containers sharing the network, or a web page aiming requests at
// 127.0.0.1. The CA's key is not kept: new certificates come with a new CA.
const (
	embeddedTLSDir = "crank-tls"
	tlsCAFile      = "ca.crt"
	tlsServerCert  = "server.crt"
	tlsServerKey   = "server.key"
	tlsClientCert  = "client.crt"
	tlsClientKey   = "client.key"
	// tlsValidity is how long generated certificates are valid;
	// tlsRenewBefore is how long before their end they are replaced (at
	// a start).
	tlsValidity    = 10 * 365 * 24 * time.Hour
	tlsRenewBefore = 30 * 24 * time.Hour
)

// embeddedCredentials are the files of an embedded etcd's credentials.
type embeddedCredentials struct {
	dir                                              string
	ca, serverCert, serverKey, clientCert, clientKey string
}

func credentialsIn(dataDir string) embeddedCredentials {
	dir := filepath.Join(dataDir, embeddedTLSDir)
	return embeddedCredentials{
		dir: dir, ca: filepath.Join(dir, tlsCAFile),
		serverCert: filepath.Join(dir, tlsServerCert), serverKey: filepath.Join(dir, tlsServerKey),
		clientCert: filepath.Join(dir, tlsClientCert), clientKey: filepath.Join(dir, tlsClientKey),
	}
}

// clientTLS is the store's TLSConfig for the credentials.
func (c embeddedCredentials) clientTLS() *TLSConfig {
	return &TLSConfig{CAFile: c.ca, CertFile: c.clientCert, KeyFile: c.clientKey}
}

// ensureEmbeddedCredentials returns the credentials of the embedded etcd
// in dataDir, generating them when there are none, when they no longer
// load, are about to expire, or do not name every host the server listens
// on. Files are written with mode 0600 (the directory 0700), and an
// existing key file that others may read is refused, not used.
func ensureEmbeddedCredentials(dataDir string, hosts []string) (embeddedCredentials, error) {
	c := credentialsIn(dataDir)
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return c, fmt.Errorf("credentials: %w", err)
	}
	if err := checkPrivate(c.dir, true); err != nil {
		return c, err
	}
	err := c.usable(hosts, time.Now())
	if err == nil {
		return c, nil
	}
	if !errors.Is(err, errRegenerate) {
		return c, err
	}
	return c, c.generate(hosts, time.Now())
}

// errRegenerate: the credentials are missing, expiring or do not fit.
var errRegenerate = errors.New("regenerate")

// usable checks the credentials on disk: errRegenerate when new ones are
// needed, another error when they must not be used as they are.
func (c embeddedCredentials) usable(hosts []string, now time.Time) error {
	for _, f := range []string{c.ca, c.serverCert, c.serverKey, c.clientCert, c.clientKey} {
		if _, err := os.Stat(f); errors.Is(err, os.ErrNotExist) {
			return errRegenerate
		} else if err != nil {
			return fmt.Errorf("credentials: %w", err)
		}
		if err := checkPrivate(f, false); err != nil {
			return err
		}
	}
	caPEM, err := os.ReadFile(c.ca)
	if err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return errRegenerate
	}
	for _, pair := range []struct {
		cert, key string
		usage     x509.ExtKeyUsage
		hosts     []string
	}{{c.serverCert, c.serverKey, x509.ExtKeyUsageServerAuth, hosts}, {c.clientCert, c.clientKey, x509.ExtKeyUsageClientAuth, nil}} {
		kp, err := tls.LoadX509KeyPair(pair.cert, pair.key)
		if err != nil {
			return errRegenerate
		}
		leaf, err := x509.ParseCertificate(kp.Certificate[0])
		if err != nil || now.Add(tlsRenewBefore).After(leaf.NotAfter) {
			return errRegenerate
		}
		opts := x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{pair.usage}}
		if _, err := leaf.Verify(opts); err != nil {
			return errRegenerate
		}
		for _, h := range pair.hosts {
			if leaf.VerifyHostname(h) != nil {
				return errRegenerate
			}
		}
	}
	return nil
}

// checkPrivate refuses a credentials file (or directory) that users other
// than the owner may access.
func checkPrivate(path string, dir bool) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	if fi.IsDir() != dir {
		return fmt.Errorf("credentials: %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		want := "600"
		if dir {
			want = "700"
		}
		return fmt.Errorf("credentials: %s is accessible to other users (mode %04o): chmod %s it, or remove it to have new credentials made", path, perm, want)
	}
	return nil
}

// generate makes a new CA, server and client certificate and writes them.
func (c embeddedCredentials) generate(hosts []string, now time.Time) error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	notBefore, notAfter := now.Add(-time.Hour), now.Add(tlsValidity)
	caTmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "crank embedded etcd CA"},
		NotBefore: notBefore, NotAfter: notAfter, IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leaf := func(cn string, usage []x509.ExtKeyUsage, hosts []string) (certPEM, keyPEM []byte, err error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial(), Subject: pkix.Name{CommonName: cn},
			NotBefore: notBefore, NotAfter: notAfter, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usage,
		}
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return nil, nil, err
		}
		kder, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return nil, nil, err
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
	}
	// The server certificate serves the client and peer listeners; etcd
	// also presents it as a client when it dials a peer.
	serverCert, serverKey, err := leaf("crank embedded etcd",
		[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, hosts)
	if err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	clientCert, clientKey, err := leaf("crank", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil)
	if err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	// Keys first, the CA last: a start interrupted half way finds a set
	// that does not verify and makes a new one.
	for _, f := range []struct {
		path string
		data []byte
	}{
		{c.serverKey, serverKey}, {c.serverCert, serverCert}, {c.clientKey, clientKey}, {c.clientCert, clientCert},
		{c.ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})},
	} {
		if err := writePrivate(f.path, f.data); err != nil {
			return err
		}
	}
	return nil
}

// writePrivate writes data to path (mode 0600) through a temporary file,
// so that a reader never sees a half-written file.
func writePrivate(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename, nothing is there
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("credentials: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("credentials: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	return nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

// loopbackHosts are the names every embedded etcd certificate carries.
var loopbackHosts = []string{"127.0.0.1", "::1", "localhost"}

// certHosts are the host names the server certificate must carry for the
// listener hosts given.
func certHosts(listen ...string) []string {
	hosts := slices.Clone(loopbackHosts)
	for _, h := range listen {
		if !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return hosts
}
