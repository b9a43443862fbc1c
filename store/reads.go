package store

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/namespace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
)

// A read's first attempt goes through the client's balanced connection and
// gets this share of the operation's time; when it times out (a member
// that accepts connections but answers nothing: stopped, partitioned,
// overloaded) the read is retried on the other members, one at a time,
// sharing what is left of the same deadline. The client's keep-alive takes
// such a member out of its balancer only after 5s+1s, longer than the
// default op_timeout. Writes are not retried this way: a write that timed
// out may yet commit.
const firstReadShare = 3

// memberReads holds one client per etcd member, for reads retried on
// another member. The clients are dialled in the background when the
// store opens (a member that is down then is dialled again on first use),
// and closed with the store.
type memberReads struct {
	ctx    context.Context // the store's background context
	cfg    clientv3.Config // the store's client configuration
	prefix string
	next   atomic.Uint32 // rotates the order members are tried in

	mu      sync.Mutex
	members []*member
}

type member struct {
	endpoint string
	hostPort string // to match the peer a timed-out attempt went to
	dialing  bool
	cli      *clientv3.Client
	kv       clientv3.KV // namespaced under the prefix
}

// newMemberReads returns nil for a single endpoint: there is no other
// member to retry on.
func newMemberReads(ctx context.Context, cfg clientv3.Config, prefix string) *memberReads {
	if len(cfg.Endpoints) < 2 {
		return nil
	}
	r := &memberReads{ctx: ctx, cfg: cfg, prefix: prefix}
	for _, ep := range cfg.Endpoints {
		hp := ep
		if _, rest, ok := strings.Cut(ep, "://"); ok {
			hp = rest
		}
		hp, _, _ = strings.Cut(hp, "/")
		m := &member{endpoint: ep, hostPort: hp}
		r.members = append(r.members, m)
		r.dial(m)
	}
	return r
}

// dial connects m in the background unless it is connected or connecting.
func (r *memberReads) dial(m *member) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m.dialing || m.cli != nil || r.ctx.Err() != nil {
		return
	}
	m.dialing = true
	cfg := r.cfg
	cfg.Endpoints = []string{m.endpoint}
	cfg.Context = r.ctx
	go func() {
		cli, err := clientv3.New(cfg)
		r.mu.Lock()
		defer r.mu.Unlock()
		m.dialing = false
		if err != nil {
			return
		}
		if r.ctx.Err() != nil {
			_ = cli.Close()
			return
		}
		m.cli, m.kv = cli, namespace.NewKV(cli.KV, r.prefix)
	}()
}

// others returns the connected members other than the one at hostPort
// (the peer of the attempt that timed out; "" when unknown), starting at a
// rotating position so that retries spread over the members.
func (r *memberReads) others(hostPort string) []clientv3.KV {
	start := int(r.next.Add(1))
	var out []clientv3.KV
	var absent []*member
	r.mu.Lock()
	for i := range r.members {
		m := r.members[(start+i)%len(r.members)]
		switch {
		case hostPort != "" && m.hostPort == hostPort:
		case m.kv == nil:
			absent = append(absent, m)
		default:
			out = append(out, m.kv)
		}
	}
	r.mu.Unlock()
	for _, m := range absent {
		r.dial(m)
	}
	return out
}

func (r *memberReads) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.members {
		if m.cli != nil {
			_ = m.cli.Close()
			m.cli, m.kv = nil, nil
		}
	}
}

// read runs f, a read without side effects, under the operation timeout
// and classifies its error, like do; f reads through kv, and runs again on
// another member when an attempt times out (see firstReadShare). f must
// set its results only once a read succeeded.
func (e *Etcd) read(ctx context.Context, op string, f func(ctx context.Context, kv clientv3.KV) error) error {
	if e.members == nil {
		return e.do(ctx, op, func(ctx context.Context) error { return f(ctx, e.kv) })
	}
	return e.do(ctx, op, func(octx context.Context) error {
		deadline, _ := octx.Deadline() // opCtx sets one
		var sent peer.Peer
		actx, cancel := context.WithDeadline(context.WithValue(octx, peerKey{}, &sent),
			time.Now().Add(time.Until(deadline)/firstReadShare))
		err := f(actx, e.kv)
		timedOut := err != nil && actx.Err() != nil && octx.Err() == nil
		cancel()
		if !timedOut {
			return err
		}
		stuck := ""
		if sent.Addr != nil {
			stuck = sent.Addr.String()
		}
		others := e.members.others(stuck)
		for i, kv := range others {
			mctx, cancel := context.WithTimeout(octx, time.Until(deadline)/time.Duration(len(others)-i))
			err = f(mctx, kv)
			timedOut = err != nil && mctx.Err() != nil && octx.Err() == nil
			cancel()
			if !timedOut {
				return err
			}
		}
		return err
	})
}

// peerKey carries a *peer.Peer for peerInterceptor to fill in with the
// member a request went to.
type peerKey struct{}

func peerInterceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if p, ok := ctx.Value(peerKey{}).(*peer.Peer); ok {
		opts = append(opts, grpc.Peer(p))
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}
