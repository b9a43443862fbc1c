package store_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// Replicas of one etcd share a key: those racing to create it all get
// the one that won, later reads get it too, another name or another
// prefix is another key, and a record that is not a key is refused.
func TestSharedKey(t *testing.T) {
	t.Parallel()
	emb, first := storetest.Embedded(t)
	ctx := ctxT(t)
	replicas := []*store.Etcd{first}
	for range 4 {
		replicas = append(replicas, storetest.Open(t, emb, store.EtcdConfig{}))
	}
	keys := make([][]byte, len(replicas))
	errs := make([]error, len(replicas))
	var wg sync.WaitGroup
	for i, r := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			keys[i], errs[i] = r.SharedKey(ctx, "cursor")
		}()
	}
	wg.Wait()
	for i := range replicas {
		if errs[i] != nil || len(keys[i]) != store.SharedKeyBytes || !bytes.Equal(keys[i], keys[0]) {
			t.Fatalf("replica %d: %x %v; replica 0: %x", i, keys[i], errs[i], keys[0])
		}
	}
	// A replica started later reads the same key.
	if k, err := storetest.Open(t, emb, store.EtcdConfig{}).SharedKey(ctx, "cursor"); err != nil || !bytes.Equal(k, keys[0]) {
		t.Fatalf("a later replica: %x %v", k, err)
	}
	if k, err := first.SharedKey(ctx, "other"); err != nil || bytes.Equal(k, keys[0]) {
		t.Fatalf("another name: %x %v", k, err)
	}
	if k, err := storetest.Open(t, emb, store.EtcdConfig{Prefix: "/other/v1/"}).SharedKey(ctx, "cursor"); err != nil || bytes.Equal(k, keys[0]) {
		t.Fatalf("another prefix: %x %v", k, err)
	}
	if _, err := first.SharedKey(ctx, "a/b"); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a name with a slash: %v", err)
	}

	cli := store.EtcdClient(first)
	for _, bad := range []any{
		map[string]any{"name": "forged", "key": make([]byte, store.SharedKeyBytes)},
		map[string]any{"name": "forged", "key": []byte("short")},
		map[string]any{"name": "cursor", "key": bytes.Repeat([]byte{1}, store.SharedKeyBytes)},
	} {
		val, _ := json.Marshal(bad)
		if _, err := cli.Put(ctx, "/crank/v1/keys/forged", string(val)); err != nil {
			t.Fatal(err)
		}
		// A fresh replica: the first one keeps the key it read.
		_, err := storetest.Open(t, emb, store.EtcdConfig{}).SharedKey(ctx, "forged")
		if err == nil || !strings.Contains(err.Error(), "shared key forged: corrupt record") {
			t.Errorf("record %s: %v", val, err)
		}
	}
}
