package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/lease/leasepb"
	"google.golang.org/protobuf/proto"
)

// Backup and restore. SaveSnapshot writes etcd's own snapshot of the
// whole keyspace (the Maintenance API's: the backend database, then its
// SHA-256), the file `etcdctl snapshot save` writes and `etcdutl snapshot
// restore` reads. RestoreSnapshot loads the keys under a prefix from such
// a file into another (empty) cluster through the client, for a restore
// without etcdutl: every key at its latest revision, with its value, and
// each lease it was on granted again for the lease's whole TTL (what
// etcdutl's restore does too), so what lived on leases (MCP sessions, SSE
// event logs, open sessions and jobs, owner registrations) expires as it
// would have, counted from the restore. Revisions start afresh: the
// store's compare-and-swaps read the revision they compare.

// SaveSnapshot writes a snapshot of the etcd this store uses to w (from
// one member: the one the client reaches first) and returns its size.
func (e *Etcd) SaveSnapshot(ctx context.Context, w io.Writer) (int64, error) {
	rc, err := e.cli.Snapshot(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: snapshot: %w", err)
	}
	defer rc.Close()
	n, err := io.Copy(w, rc)
	if err != nil {
		return n, fmt.Errorf("store: snapshot: %w", err)
	}
	return n, nil
}

// RestoreReport says what RestoreSnapshot loaded.
type RestoreReport struct {
	Keys   int // keys put
	Leases int // leases granted again
	// Revision is the snapshot's revision: the state it holds is etcd's
	// at that revision.
	Revision int64
}

// RestoreSnapshot puts the keys under this store's prefix of the snapshot
// file path into the etcd this store uses, which must hold none yet (a
// new cluster, or a prefix never used): a restore over live state is
// refused, naming how many keys are there. A file whose trailing SHA-256
// does not match is refused.
func (e *Etcd) RestoreSnapshot(ctx context.Context, path string) (RestoreReport, error) {
	var rep RestoreReport
	cli, prefix := e.cli, e.prefix
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return rep, fmt.Errorf("store: restore: %w", err)
	}
	// The store's own ping key aside, which any store writes at start.
	if resp.Count > 0 {
		live, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(2))
		if err != nil {
			return rep, fmt.Errorf("store: restore: %w", err)
		}
		for _, kv := range live.Kvs {
			if string(kv.Key) != prefix+pingKey {
				return rep, fmt.Errorf("store: restore: %w: the etcd at hand holds %d keys under %s already; restore into a new cluster (or another prefix)",
					ErrInvalid, resp.Count, prefix)
			}
		}
	}
	db, cleanup, err := openSnapshot(path)
	if err != nil {
		return rep, err
	}
	defer cleanup()
	latest := map[string]*mvccpb.KeyValue{}
	leases := map[int64]int64{} // lease ID → TTL in seconds
	err = db.View(func(tx *bolt.Tx) error {
		kb := tx.Bucket([]byte("key"))
		if kb == nil {
			return fmt.Errorf("store: restore %s: no key bucket: not an etcd snapshot", path)
		}
		err := kb.ForEach(func(rev, val []byte) error {
			var kv mvccpb.KeyValue
			if err := proto.Unmarshal(val, &kv); err != nil {
				return fmt.Errorf("store: restore %s: a key's record: %w", path, err)
			}
			if kv.ModRevision > rep.Revision {
				rep.Revision = kv.ModRevision
			}
			if !bytes.HasPrefix(kv.Key, []byte(prefix)) {
				return nil
			}
			if len(rev) == 18 && rev[17] == 't' { // a tombstone: deleted at this revision
				delete(latest, string(kv.Key))
				return nil
			}
			latest[string(kv.Key)] = &kv
			return nil
		})
		if err != nil {
			return err
		}
		if lb := tx.Bucket([]byte("lease")); lb != nil {
			return lb.ForEach(func(_, val []byte) error {
				var l leasepb.Lease
				if err := proto.Unmarshal(val, &l); err != nil {
					return fmt.Errorf("store: restore %s: a lease: %w", path, err)
				}
				leases[l.ID] = l.TTL
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return rep, err
	}
	granted := map[int64]clientv3.LeaseID{}
	for _, kv := range latest {
		var opts []clientv3.OpOption
		if kv.Lease != 0 {
			id, ok := granted[kv.Lease]
			if !ok {
				ttl, known := leases[kv.Lease]
				if !known {
					continue // its lease had expired: the key was going
				}
				resp, err := cli.Grant(ctx, max(ttl, 1))
				if err != nil {
					return rep, fmt.Errorf("store: restore: grant a lease of %ds: %w", ttl, err)
				}
				id, granted[kv.Lease] = resp.ID, resp.ID
				rep.Leases++
			}
			opts = append(opts, clientv3.WithLease(id))
		}
		if _, err := cli.Put(ctx, string(kv.Key), string(kv.Value), opts...); err != nil {
			return rep, fmt.Errorf("store: restore: put %s: %w", truncate(string(kv.Key)), err)
		}
		rep.Keys++
	}
	return rep, nil
}

// openSnapshot opens the database of the snapshot file path read-only,
// after checking and cutting its trailing SHA-256.
func openSnapshot(path string) (*bolt.DB, func(), error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("store: restore: %w", err)
	}
	if len(b) < sha256.Size {
		return nil, nil, fmt.Errorf("store: restore %s: too short to be a snapshot (%d bytes)", path, len(b))
	}
	data, sum := b[:len(b)-sha256.Size], b[len(b)-sha256.Size:]
	if h := sha256.Sum256(data); !bytes.Equal(h[:], sum) {
		return nil, nil, fmt.Errorf("store: restore %s: its SHA-256 does not match: not a whole etcd snapshot", path)
	}
	dir, err := os.MkdirTemp("", "crank-restore-")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	dbPath := filepath.Join(dir, "db")
	if err := os.WriteFile(dbPath, data, 0o600); err != nil {
		cleanup()
		return nil, nil, err
	}
	db, err := bolt.Open(dbPath, 0o400, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("store: restore %s: %w", path, err)
	}
	return db, func() { _ = db.Close(); cleanup() }, nil
}
