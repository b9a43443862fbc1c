package grpcadapter

import (
	"context"
	"net"
	"strings"

	"github.com/crankmcp/crank/plugins/sdk/egress"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// connPool shares one grpc.ClientConn (an HTTP/2 connection pool with its
// own reconnect logic) per connection settings among all operations of the
// adapter. Connections unused for connIdleClose are closed when the pool
// grows past maxConns.
type connPool struct {
	mu sync.RWMutex
	m  map[string]*pooledConn
}

type pooledConn struct {
	cc       *grpc.ClientConn
	lastUsed atomic.Int64 // unix nanoseconds
}

const (
	maxConns      = 128
	connIdleClose = 10 * time.Minute
)

func (p *connPool) get(c *config) (*grpc.ClientConn, error) {
	now := time.Now().UnixNano()
	p.mu.RLock()
	pc := p.m[c.connKey]
	p.mu.RUnlock()
	if pc != nil {
		if pc.lastUsed.Load() < now-int64(time.Second) {
			pc.lastUsed.Store(now)
		}
		return pc.cc, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if pc := p.m[c.connKey]; pc != nil {
		return pc.cc, nil
	}
	creds := insecure.NewCredentials()
	if !c.plaintext {
		creds = credentials.NewTLS(c.tls.Clone())
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds), grpc.WithUserAgent("crank-grpc/" + version)}
	if c.egress != nil {
		opts = append(opts, grpc.WithContextDialer(egressDialer(c.egress)))
	}
	cc, err := grpc.NewClient(c.target, opts...)
	if err != nil {
		return nil, err
	}
	if p.m == nil {
		p.m = map[string]*pooledConn{}
	}
	if len(p.m) >= maxConns {
		for k, old := range p.m {
			if old.lastUsed.Load() < now-int64(connIdleClose) {
				_ = old.cc.Close()
				delete(p.m, k)
			}
		}
	}
	pc = &pooledConn{cc: cc}
	pc.lastUsed.Store(now)
	p.m[c.connKey] = pc
	return cc, nil
}

// close closes every connection.
func (p *connPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, pc := range p.m {
		_ = pc.cc.Close()
		delete(p.m, k)
	}
}

// egressDialer is a connection's dialer under an entry's egress rules:
// every address gRPC connects to (what its resolver found, or a name the
// dialer resolves) is checked as it is dialled. gRPC hands a custom
// dialer a unix target as unix://path or unix:path, an abstract one as
// NUL and its name.
func egressDialer(rs *egress.Rules) func(context.Context, string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 20 * time.Second, KeepAlive: 30 * time.Second, Control: rs.Control}
	return func(ctx context.Context, addr string) (net.Conn, error) {
		network := "tcp"
		switch {
		case strings.HasPrefix(addr, "\x00"):
			network, addr = "unix", "@"+addr[1:]
		case strings.HasPrefix(addr, "unix:"):
			network, addr = "unix", strings.TrimPrefix(strings.TrimPrefix(addr, "unix:"), "//")
		}
		return d.DialContext(ctx, network, addr)
	}
}
