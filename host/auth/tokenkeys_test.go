package auth

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"testing"
)

func newKey() string {
	b := make([]byte, TokenKeyBytes)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// A sealed value opens with its key and record only, through a rotation;
// it says nothing of the value in clear.
func TestTokenKeys(t *testing.T) {
	old, cur := newKey(), newKey()
	k1, err := NewTokenKeys(old, nil)
	if err != nil {
		t.Fatal(err)
	}
	secret := []byte(`{"access_token":"at-very-secret","refresh_token":"rt-very-secret"}`)
	sealed, err := k1.Seal(secret, []byte("grant alice"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("very-secret")) || bytes.Contains(sealed, []byte(base64.StdEncoding.EncodeToString(secret)[:20])) {
		t.Fatalf("sealed value shows the tokens: %s", sealed)
	}
	if p, stale, err := k1.Open(sealed, []byte("grant alice")); err != nil || stale || !bytes.Equal(p, secret) {
		t.Fatalf("open: %q %v %v", p, stale, err)
	}
	if _, _, err := k1.Open(sealed, []byte("grant bob")); err == nil {
		t.Error("a value opened as another record's")
	}
	k2, err := NewTokenKeys(cur, []string{old})
	if err != nil {
		t.Fatal(err)
	}
	if p, stale, err := k2.Open(sealed, []byte("grant alice")); err != nil || !stale || !bytes.Equal(p, secret) {
		t.Fatalf("open during a rotation: %q stale %v %v", p, stale, err)
	}
	k3, _ := NewTokenKeys(cur, nil)
	if _, _, err := k3.Open(sealed, []byte("grant alice")); !errors.Is(err, ErrUnknownTokenKey) {
		t.Errorf("open after the old key is dropped: %v", err)
	}
	resealed, _ := k2.Seal(secret, []byte("grant alice"))
	if _, stale, err := k3.Open(resealed, []byte("grant alice")); err != nil || stale {
		t.Errorf("resealed: stale %v %v", stale, err)
	}
	for _, bad := range []string{"", "not base64!", base64.StdEncoding.EncodeToString([]byte("short"))} {
		if _, err := NewTokenKeys(bad, nil); err == nil {
			t.Errorf("key %q accepted", bad)
		}
	}
}
