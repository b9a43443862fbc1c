package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// sharedKeysDir holds the secret keys every replica of a fleet shares.
const sharedKeysDir = "keys/"

// SharedKeyBytes is the length of a shared key: 256 random bits.
const SharedKeyBytes = 32

// sharedKeyRecord is a shared key as etcd keeps it.
type sharedKeyRecord struct {
	Name      string    `json:"name"`
	Key       []byte    `json:"key"` // base64 in JSON
	CreatedAt time.Time `json:"created_at"`
}

func sharedKey(name string) string { return sharedKeysDir + name }

// SharedKey returns the secret key called name that every replica using
// this etcd and prefix reads alike, for what one replica must be able to
// check that another made (the host authenticates the cursors it hands to
// clients with one). The first replica to ask creates it, SharedKeyBytes
// from crypto/rand, with a compare-and-swap on the key's absence: of
// replicas racing to create it, one wins and all the others read its key.
// A key is never replaced and has no lease; deleting
// <prefix>keys/<name> and restarting every replica makes a new one (and
// invalidates what the old one authenticated). A key read is kept for the
// life of the Etcd, so a name costs one etcd read (two at its creation)
// per process. Names follow ValidCatalogName's rule. A record that
// is not a key of that name is an error naming it, never used.
func (e *Etcd) SharedKey(ctx context.Context, name string) ([]byte, error) {
	if k, ok := e.keys.Load(name); ok {
		return k.([]byte), nil
	}
	if !catalogNameRE.MatchString(name) { // named like catalogs
		return nil, fmt.Errorf("store: %w: shared key name %q: must be 1-64 characters of A-Z a-z 0-9 _ . -, starting with a letter or digit",
			ErrInvalid, truncate(name))
	}
	op := "shared key " + name
	var key []byte
	err := e.do(ctx, op, func(ctx context.Context) error {
		k := sharedKey(name)
		resp, err := e.kv.Get(ctx, k)
		if err != nil {
			return err
		}
		if len(resp.Kvs) == 0 {
			fresh := make([]byte, SharedKeyBytes)
			_, _ = rand.Read(fresh)
			val, _ := e.encodeRecord(sharedKeyRecord{Name: name, Key: fresh, CreatedAt: e.now().UTC()})
			txn, err := e.kv.Txn(ctx).
				If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
				Then(clientv3.OpPut(k, string(val))).
				Else(clientv3.OpGet(k)).
				Commit()
			if err != nil {
				return err
			}
			if txn.Succeeded {
				key = fresh
				return nil
			}
			resp = (*clientv3.GetResponse)(txn.Responses[0].GetResponseRange())
			if len(resp.Kvs) == 0 {
				return fmt.Errorf("%w: the shared key was deleted as it was created", ErrConflict)
			}
		}
		key, err = decodeSharedKey(name, resp.Kvs[0].Value)
		return err
	})
	if err != nil {
		return nil, err
	}
	k, _ := e.keys.LoadOrStore(name, key)
	return k.([]byte), nil
}

// decodeSharedKey reads a shared key's record: it must name the key and
// hold SharedKeyBytes that are not all zero.
func decodeSharedKey(name string, val []byte) ([]byte, error) {
	var rec sharedKeyRecord
	if err := decodeRecord("shared key "+name, val, &rec); err != nil {
		return nil, err
	}
	switch {
	case rec.Name != name:
		return nil, fmt.Errorf("store: decode shared key %s: corrupt record: it names key %q", name, truncate(rec.Name))
	case len(rec.Key) != SharedKeyBytes || bytes.Equal(rec.Key, make([]byte, SharedKeyBytes)):
		return nil, fmt.Errorf("store: decode shared key %s: corrupt record: not %d random bytes", name, SharedKeyBytes)
	}
	return rec.Key, nil
}
