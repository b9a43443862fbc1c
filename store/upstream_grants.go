package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Users' grants at upstreams (upstream_auth grant authorization_code):
// what each user consented to at an upstream's provider, and the consents
// under way. The store keeps what the host hands it; the tokens arrive
// sealed (host/auth's envelope encryption), and nothing here can open
// them.
//
//	upstream-grants/<workspace>/<upstream>/<user digest>   a user's grant: no lease
//	upstream-grant-locks/<workspace>/<upstream>/<digest>   its refresh in flight: a lease
//	upstream-consents/<id>                                 a consent under way: a lease
//
// A grant is replaced by compare-and-swap on the revision read, so that
// of two replicas refreshing it one wins; the refresh lock (a key created
// only when absent, on a short lease) keeps a second refresh from
// starting while one is in flight anywhere in the fleet, and a refresher
// that dies leaves it to expire. A consent is taken once: its callback
// moves it from pending to taken by compare-and-swap, so a replayed state
// finds it taken (or gone: it expires).

const (
	upstreamGrantsDir     = "upstream-grants/"
	upstreamGrantLocksDir = "upstream-grant-locks/"
	upstreamConsentsDir   = "upstream-consents/"
	// UpstreamConsentIDPrefix starts a consent's ID.
	UpstreamConsentIDPrefix = "uc_"
)

// UpstreamGrant is a user's grant at an upstream.
type UpstreamGrant struct {
	WorkspaceID string `json:"workspace_id"`
	Upstream    string `json:"upstream"`
	User        string `json:"user"`
	// Scope is what the provider granted.
	Scope string `json:"scope,omitempty"`
	// Sealed are the user's tokens, sealed by the host.
	Sealed []byte `json:"sealed"`
	// Expires is when the access token expires, Renew when it is
	// refreshed; Refreshable whether there is a refresh token.
	Expires     time.Time `json:"expires"`
	Renew       time.Time `json:"renew"`
	Refreshable bool      `json:"refreshable,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	// Revision is the record's etcd revision, which a replacement expects.
	Revision int64 `json:"-"`
}

// UserDigest names a user in keys: 128 bits of SHA-256, hex, so that any
// user string makes a key of one segment.
func UserDigest(user string) string {
	sum := sha256.Sum256([]byte("crank upstream grant user\x00" + user))
	return hex.EncodeToString(sum[:16])
}

func upstreamGrantKey(workspace, upstream, user string) string {
	return upstreamGrantsDir + url.PathEscape(workspace) + "/" + url.PathEscape(upstream) + "/" + UserDigest(user)
}

func upstreamGrantLockKey(workspace, upstream, user string) string {
	return upstreamGrantLocksDir + url.PathEscape(workspace) + "/" + url.PathEscape(upstream) + "/" + UserDigest(user)
}

// grantName names a grant in errors: its upstream and the user's digest.
func grantName(workspace, upstream, user string) string {
	return fmt.Sprintf("upstream grant %s/%s/%s", truncate(workspace), truncate(upstream), UserDigest(user)[:8])
}

func decodeUpstreamGrant(kv *mvccpb.KeyValue) (*UpstreamGrant, error) {
	var g UpstreamGrant
	if err := decodeRecord(truncate(string(kv.Key)), kv.Value, &g); err != nil {
		return nil, err
	}
	if string(kv.Key) != upstreamGrantKey(g.WorkspaceID, g.Upstream, g.User) {
		return nil, fmt.Errorf("store: decode %s: corrupt record: it names %s", truncate(string(kv.Key)), grantName(g.WorkspaceID, g.Upstream, g.User))
	}
	if len(g.Sealed) == 0 {
		return nil, fmt.Errorf("store: decode %s: corrupt record: no tokens", truncate(string(kv.Key)))
	}
	g.Revision = kv.ModRevision
	return &g, nil
}

// GetUpstreamGrant returns a user's grant at an upstream, or ErrNotFound.
func (e *Etcd) GetUpstreamGrant(ctx context.Context, workspace, upstream, user string) (*UpstreamGrant, error) {
	kv, err := e.get(ctx, "get "+grantName(workspace, upstream, user), upstreamGrantKey(workspace, upstream, user))
	if err != nil {
		return nil, err
	}
	if kv == nil {
		return nil, ErrNotFound
	}
	return decodeUpstreamGrant(kv)
}

// PutUpstreamGrant writes a grant if its record is still at revision
// expect (0: absent; AnyVersion: whatever it is), or returns ErrConflict.
func (e *Etcd) PutUpstreamGrant(ctx context.Context, g UpstreamGrant, expect int64) (*UpstreamGrant, error) {
	name := grantName(g.WorkspaceID, g.Upstream, g.User)
	if g.WorkspaceID == "" || g.Upstream == "" || g.User == "" || len(g.Sealed) == 0 {
		return nil, fmt.Errorf("store: %s: %w: workspace, upstream, user and sealed tokens are required", name, ErrInvalid)
	}
	now := e.now().UTC()
	if g.CreatedAt.IsZero() {
		g.CreatedAt = now
	}
	g.UpdatedAt = now
	val, _ := e.encodeRecord(g)
	if len(val) > e.maxValue {
		return nil, &TooLargeError{What: name, Size: len(val), Limit: e.maxValue}
	}
	key := upstreamGrantKey(g.WorkspaceID, g.Upstream, g.User)
	err := e.do(ctx, "put "+name, func(ctx context.Context) error {
		txn := e.kv.Txn(ctx)
		if expect != AnyVersion {
			txn = txn.If(clientv3.Compare(clientv3.ModRevision(key), "=", expect))
		}
		resp, err := txn.Then(clientv3.OpPut(key, string(val))).Commit()
		if err != nil {
			return err
		}
		if !resp.Succeeded {
			return fmt.Errorf("%w: %s changed since it was read", ErrConflict, name)
		}
		g.Revision = resp.Header.Revision
		return nil
	})
	if err != nil {
		return nil, err
	}
	e.wrote()
	return &g, nil
}

// DeleteUpstreamGrant removes a user's grant and returns it (ErrNotFound
// when there was none); expect is the revision it must still have
// (AnyVersion: whatever it is).
func (e *Etcd) DeleteUpstreamGrant(ctx context.Context, workspace, upstream, user string, expect int64) (*UpstreamGrant, error) {
	name := grantName(workspace, upstream, user)
	key := upstreamGrantKey(workspace, upstream, user)
	var prev *mvccpb.KeyValue
	err := e.do(ctx, "delete "+name, func(ctx context.Context) error {
		txn := e.kv.Txn(ctx)
		if expect != AnyVersion {
			txn = txn.If(clientv3.Compare(clientv3.ModRevision(key), "=", expect))
		}
		resp, err := txn.Then(clientv3.OpDelete(key, clientv3.WithPrevKV())).Commit()
		if err != nil {
			return err
		}
		if !resp.Succeeded {
			return fmt.Errorf("%w: %s changed since it was read", ErrConflict, name)
		}
		if kvs := resp.Responses[0].GetResponseDeleteRange().GetPrevKvs(); len(kvs) > 0 {
			prev = kvs[0]
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if prev == nil {
		return nil, ErrNotFound
	}
	return decodeUpstreamGrant(prev)
}

// ListUpstreamGrants returns the grants of a workspace, of one user when
// user is set, by upstream (at most MaxLivePage; the rest are counted in
// CountUpstreamGrants). A record that does not decode is skipped.
func (e *Etcd) ListUpstreamGrants(ctx context.Context, workspace, user string) ([]*UpstreamGrant, error) {
	var out []*UpstreamGrant
	err := e.scanUpstreamGrants(ctx, workspace, func(g *UpstreamGrant) bool {
		if user == "" || g.User == user {
			out = append(out, g)
		}
		return len(out) < MaxLivePage
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Upstream < out[j].Upstream })
	return out, err
}

// CountUpstreamGrants counts a workspace's grants per upstream.
func (e *Etcd) CountUpstreamGrants(ctx context.Context, workspace string) (map[string]int, error) {
	n := map[string]int{}
	err := e.scanUpstreamGrants(ctx, workspace, func(g *UpstreamGrant) bool {
		n[g.Upstream]++
		return true
	})
	return n, err
}

// scanUpstreamGrants calls f on each grant of a workspace, a page at a
// time, until it returns false.
func (e *Etcd) scanUpstreamGrants(ctx context.Context, workspace string, f func(*UpstreamGrant) bool) error {
	prefix := upstreamGrantsDir + url.PathEscape(workspace) + "/"
	from := prefix
	end := clientv3.GetPrefixRangeEnd(prefix)
	for {
		var kvs []*mvccpb.KeyValue
		err := e.read(ctx, "list upstream grants of "+truncate(workspace), func(ctx context.Context, kv clientv3.KV) error {
			resp, err := kv.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(200))
			if err == nil {
				kvs = resp.Kvs
			}
			return err
		})
		if err != nil {
			return err
		}
		for _, kv := range kvs {
			g, err := decodeUpstreamGrant(kv)
			if err != nil {
				e.log.Warn("skipping an upstream grant that does not decode", zap.Error(err))
				continue
			}
			if !f(g) {
				return nil
			}
		}
		if len(kvs) < 200 {
			return nil
		}
		from = string(kvs[len(kvs)-1].Key) + "\x00"
	}
}

// LockUpstreamGrant takes the refresh lock of a user's grant for at most
// about ttl: ok is false when a refresh holds it (anywhere in the fleet).
// unlock releases it.
func (e *Etcd) LockUpstreamGrant(ctx context.Context, workspace, upstream, user string, ttl time.Duration) (unlock func(), ok bool, err error) {
	name := grantName(workspace, upstream, user)
	key := upstreamGrantLockKey(workspace, upstream, user)
	token := rand.Text()
	err = e.do(ctx, "lock "+name, func(ctx context.Context) error {
		return e.leases.withLease(ctx, ttl, func(lease clientv3.LeaseID) error {
			resp, err := e.kv.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
				Then(clientv3.OpPut(key, token, clientv3.WithLease(lease))).Commit()
			if err == nil {
				ok = resp.Succeeded
			}
			return err
		})
	})
	if err != nil || !ok {
		return func() {}, false, err
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = e.do(ctx, "unlock "+name, func(ctx context.Context) error {
			_, err := e.kv.Txn(ctx).If(clientv3.Compare(clientv3.Value(key), "=", token)).Then(clientv3.OpDelete(key)).Commit()
			return err
		})
	}, true, nil
}

// Consent statuses.
const (
	ConsentPending = "pending" // the user has not come back yet
	ConsentTaken   = "taken"   // its callback came and is being served
	ConsentDone    = "done"    // the grant is stored
	ConsentFailed  = "failed"  // the provider or the exchange refused it
)

// UpstreamConsent is a consent under way: what its state is bound to,
// and where it stands.
type UpstreamConsent struct {
	ID          string `json:"id"`
	WorkspaceID string `json:"workspace_id"`
	Upstream    string `json:"upstream"`
	User        string `json:"user"`
	// Session is the digest of the MCP session the call came on ("" for
	// none); Call a digest of the call (tool and arguments).
	Session string `json:"session,omitempty"`
	Call    string `json:"call"`
	// RedirectURI is the redirect URI the authorization request named,
	// which the code's exchange names again.
	RedirectURI string `json:"redirect_uri"`
	// Sealed is the host's sealed secret of the consent (its PKCE
	// verifier).
	Sealed    []byte    `json:"sealed"`
	Status    string    `json:"status"`
	Error     string    `json:"error,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	Revision  int64     `json:"-"`
}

func upstreamConsentKey(id string) string { return upstreamConsentsDir + id }

func decodeUpstreamConsent(kv *mvccpb.KeyValue) (*UpstreamConsent, error) {
	var c UpstreamConsent
	if err := decodeRecord(truncate(string(kv.Key)), kv.Value, &c); err != nil {
		return nil, err
	}
	switch {
	case string(kv.Key) != upstreamConsentKey(c.ID):
		return nil, fmt.Errorf("store: decode %s: corrupt record: it names consent %q", truncate(string(kv.Key)), truncate(c.ID))
	case c.Status != ConsentPending && c.Status != ConsentTaken && c.Status != ConsentDone && c.Status != ConsentFailed:
		return nil, fmt.Errorf("store: decode %s: corrupt record: unknown status %q", truncate(string(kv.Key)), truncate(c.Status))
	}
	c.Revision = kv.ModRevision
	return &c, nil
}

// CreateUpstreamConsent records a new consent, pending, with a fresh ID,
// until its ExpiresAt.
func (e *Etcd) CreateUpstreamConsent(ctx context.Context, c UpstreamConsent) (*UpstreamConsent, error) {
	c.ID = newID(UpstreamConsentIDPrefix)
	c.Status = ConsentPending
	c.CreatedAt = e.now().UTC()
	ttl := c.ExpiresAt.Sub(c.CreatedAt)
	if ttl <= 0 || c.User == "" || c.Upstream == "" {
		return nil, fmt.Errorf("store: upstream consent: %w: a user, an upstream and a future expiry are required", ErrInvalid)
	}
	val, _ := e.encodeRecord(c)
	err := e.do(ctx, "create upstream consent", func(ctx context.Context) error {
		return e.leases.withLease(ctx, ttl, func(lease clientv3.LeaseID) error {
			resp, err := e.kv.Txn(ctx).Then(clientv3.OpPut(upstreamConsentKey(c.ID), string(val), clientv3.WithLease(lease))).Commit()
			if err == nil {
				c.Revision = resp.Header.Revision
			}
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	e.wrote()
	return &c, nil
}

// GetUpstreamConsent returns a consent, or ErrNotFound once it expired.
func (e *Etcd) GetUpstreamConsent(ctx context.Context, id string) (*UpstreamConsent, error) {
	if !wellFormedID(id, UpstreamConsentIDPrefix) {
		return nil, ErrNotFound
	}
	kv, err := e.get(ctx, "get upstream consent", upstreamConsentKey(id))
	if err != nil {
		return nil, err
	}
	if kv == nil {
		return nil, ErrNotFound
	}
	c, err := decodeUpstreamConsent(kv)
	if err == nil && !e.now().Before(c.ExpiresAt) {
		return nil, ErrNotFound // its lease outlives it a little
	}
	return c, err
}

// ErrConsentUsed: a consent's callback came once already.
var ErrConsentUsed = errors.New("store: the consent was completed or refused already")

// SetUpstreamConsent moves a consent from the status it had at the
// revision read (c.Revision) to status, with errMsg; ErrConsentUsed when
// it moved on meanwhile (a replay), ErrNotFound once it expired. It keeps
// its lease.
func (e *Etcd) SetUpstreamConsent(ctx context.Context, c *UpstreamConsent, status, errMsg string) (*UpstreamConsent, error) {
	next := *c
	next.Status, next.Error = status, errMsg
	val, _ := e.encodeRecord(next)
	key := upstreamConsentKey(c.ID)
	err := e.do(ctx, "set upstream consent", func(ctx context.Context) error {
		resp, err := e.kv.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", c.Revision)).
			Then(clientv3.OpPut(key, string(val), clientv3.WithIgnoreLease())).
			Else(clientv3.OpGet(key, clientv3.WithCountOnly())).Commit()
		if err != nil {
			return err
		}
		if !resp.Succeeded {
			if resp.Responses[0].GetResponseRange().GetCount() == 0 {
				return ErrNotFound
			}
			return ErrConsentUsed
		}
		next.Revision = resp.Header.Revision
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &next, nil
}
