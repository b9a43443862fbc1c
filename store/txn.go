package store

import (
	"context"
	"fmt"
	"github.com/crankmcp/crank/plugins/sdk"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/connectivity"
)

// Compare-and-swap retry budget: a transition re-applies itself after
// losing a race (cas at once, on the value read back, for casAttempts
// attempts, then with a jittered backoff until the operation timeout; the
// event log's append with a jittered backoff between attempts).
const (
	casAttempts   = 16
	casBackoffMin = time.Millisecond
	casBackoffMax = 50 * time.Millisecond
)

// casBackoff is the wait between contended attempts (sdk.Backoff: jittered,
// so writers in lockstep part).
var casBackoff = sdk.Backoff{Initial: casBackoffMin, Max: casBackoffMax}

// opCtx bounds one store operation by the operation timeout (unless the
// caller's deadline is sooner), so that an unreachable etcd fails the call
// fast instead of blocking it: the etcd client waits for a connection for as
// long as its context allows.
func (e *Etcd) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= e.opTimeout {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, e.opTimeout)
}

// precheck fails at once, without waiting for the operation timeout, while
// the client's connection is known to be down; it also nudges the
// connection to reconnect, so that recovery does not depend on traffic.
func (e *Etcd) precheck(op string) error {
	conn := e.cli.ActiveConnection()
	if conn == nil {
		return nil
	}
	switch conn.GetState() {
	case connectivity.TransientFailure:
		conn.Connect()
		return &UnavailableError{Op: op, Err: fmt.Errorf("connection to %s is down", e.endpoints())}
	case connectivity.Idle:
		conn.Connect()
	}
	return nil
}

func (e *Etcd) endpoints() string {
	eps := e.cli.Endpoints()
	if len(eps) == 1 {
		return eps[0]
	}
	return fmt.Sprint(eps)
}

// do runs f under the operation timeout and classifies its error.
func (e *Etcd) do(ctx context.Context, op string, f func(ctx context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("store: %s: %w", op, err)
	}
	if err := e.precheck(op); err != nil {
		return err
	}
	octx, cancel := e.opCtx(ctx)
	defer cancel()
	return e.note(classify(ctx, op, f(octx)))
}

// get reads one key (nil when absent) under the operation timeout.
func (e *Etcd) get(ctx context.Context, op, key string) (*mvccpb.KeyValue, error) {
	var kv *mvccpb.KeyValue
	err := e.read(ctx, op, func(ctx context.Context, rd clientv3.KV) error {
		resp, err := rd.Get(ctx, key)
		if err != nil {
			return err
		}
		if len(resp.Kvs) > 0 {
			kv = resp.Kvs[0]
		}
		return nil
	})
	return kv, err
}

// plan is the write half of one compare-and-swap attempt: operations to
// commit if the entity is unchanged, and the bucket leases they use (so that
// a lease etcd no longer knows can be replaced and the attempt retried).
type plan struct {
	e      *Etcd
	ctx    context.Context
	ops    []clientv3.Op
	leases []heldLease
	// size approximates the request size, for the etcd request limit.
	size int
}

type heldLease struct {
	ttl time.Duration
	id  clientv3.LeaseID
}

// leaseKeep re-puts a key on the lease it already has.
const leaseKeep time.Duration = -1

func (e *Etcd) newPlan(ctx context.Context) *plan { return &plan{e: e, ctx: ctx} }

// put adds a put of key. ttl > 0 puts it on the bucket lease for ttl;
// leaseKeep keeps the key's current lease (the key must exist); 0 means no
// lease.
func (p *plan) put(key string, val []byte, ttl time.Duration) error {
	var opts []clientv3.OpOption
	switch {
	case ttl == leaseKeep:
		opts = append(opts, clientv3.WithIgnoreLease())
	case ttl > 0:
		id, err := p.e.leases.acquire(p.ctx, ttl)
		if err != nil {
			return err
		}
		p.leases = append(p.leases, heldLease{ttl, id})
		opts = append(opts, clientv3.WithLease(id))
	}
	p.ops = append(p.ops, clientv3.OpPut(key, string(val), opts...))
	p.size += len(key) + len(val) + 32
	return nil
}

func (p *plan) del(key string, opts ...clientv3.OpOption) {
	p.ops = append(p.ops, clientv3.OpDelete(key, opts...))
	p.size += 2*len(key) + 32
}

// cas runs a compare-and-swap loop on key: read it, let step decide what to
// write given the current value (nil when absent), and commit that only if
// the key's mod revision is still the one read. A lost race's transaction
// reads the key back and step runs again on that value, so a transition is always applied to the latest state and
// no concurrent update is lost. After casAttempts losses in a row it
// backs off (jittered, so writers in lockstep part) and goes on until the
// operation timeout, then reports ErrConflict. step returns a nil plan (or
// one without operations) to write nothing, and an error to stop.
//
// It returns the revision of the commit (0 when nothing was written).
func (e *Etcd) cas(ctx context.Context, op, key string, step func(kv *mvccpb.KeyValue, p *plan) error) (int64, error) {
	kv, err := e.get(ctx, op, key)
	if err != nil {
		return 0, err
	}
	giveUp := time.Now().Add(e.opTimeout)
	attempt := 0
	for ; attempt < casAttempts || time.Now().Before(giveUp); attempt++ {
		if attempt >= casAttempts && !casBackoff.Wait(ctx, attempt-casAttempts+1) {
			return 0, fmt.Errorf("store: %s: %w", op, ctx.Err())
		}
		// Lease grants inside step run under their own operation timeout.
		sctx, cancel := e.opCtx(ctx)
		p := e.newPlan(sctx)
		err = step(kv, p)
		cancel()
		if err != nil {
			return 0, e.note(classifyStep(ctx, op, err))
		}
		if len(p.ops) == 0 {
			return 0, nil
		}
		if p.size > e.maxRequest {
			return 0, fmt.Errorf("store: %s: %w: request of about %d bytes exceeds etcd's request limit (%d bytes)", op, ErrTooLarge, p.size, e.maxRequest)
		}
		readRev := int64(0)
		if kv != nil {
			readRev = kv.ModRevision
		}
		unchanged := clientv3.Compare(clientv3.ModRevision(key), "=", readRev)
		var ok bool
		var rev int64
		var now *mvccpb.KeyValue
		err = e.do(ctx, op, func(ctx context.Context) error {
			resp, err := e.kv.Txn(ctx).If(unchanged).Then(p.ops...).Else(clientv3.OpGet(key)).Commit()
			if err != nil {
				return err
			}
			ok, rev = resp.Succeeded, resp.Header.GetRevision()
			if !ok && len(resp.Responses) > 0 {
				if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
					now = kvs[0]
				}
			}
			return nil
		})
		if isLeaseNotFound(err) {
			for _, l := range p.leases {
				e.leases.invalidate(ctx, l.ttl, l.id)
			}
			continue
		}
		if err != nil {
			return 0, err
		}
		if ok {
			e.wrote()
			return rev, nil
		}
		// Lost the race: another writer committed, so someone progresses.
		// Re-apply at once on the value the transaction read back; waiting
		// would only let a busy writer (a session's items arriving) commit
		// again, and a fresh read would widen the window between reading
		// and committing to two round trips.
		kv = now
	}
	return 0, fmt.Errorf("store: %s: %w: still contended after %d attempts", op, ErrConflict, attempt)
}

// classifyStep classifies errors from lease grants made inside a step;
// errors the step produced itself pass through.
func classifyStep(ctx context.Context, op string, err error) error {
	if isUnavailable(err) || isNoSpace(err) || ctx.Err() != nil {
		return classify(ctx, op, err)
	}
	return err
}
