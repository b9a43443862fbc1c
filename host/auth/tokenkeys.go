package auth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Envelope encryption of the users' upstream tokens at rest: each sealed
// value has a data key of its own (256 random bits) that encrypts it with
// AES-256-GCM, and the data key is encrypted (wrapped) with the key
// encryption key the config takes from a placeholder (token_key), named
// in the envelope by its fingerprint. Both encryptions are bound to what
// the value is (aad: the record it belongs to), so a value moved to
// another record does not open. A rotation configures the new key as
// token_key and the old one in previous_token_keys: values wrapped with
// either open, and each is sealed again with token_key when next
// written (a refresh); once every grant has been rewritten or has
// expired, the old key is dropped.

// TokenKeyBytes is the length of a token key: 256 bits.
const TokenKeyBytes = 32

// TokenKeys are the key new values are sealed with and the keys they may
// have been sealed with.
type TokenKeys struct {
	current string // its fingerprint
	keys    map[string][]byte
}

// NewTokenKeys reads the current key and the previous ones (base64,
// standard or URL alphabet, padded or not), naming the field of a bad
// one.
func NewTokenKeys(current string, previous []string) (*TokenKeys, error) {
	k := &TokenKeys{keys: map[string][]byte{}}
	key, err := decodeTokenKey(current)
	if err != nil {
		return nil, fmt.Errorf("token_key: %w", err)
	}
	k.current = keyFingerprint(key)
	k.keys[k.current] = key
	for i, p := range previous {
		key, err := decodeTokenKey(p)
		if err != nil {
			return nil, fmt.Errorf("previous_token_keys: key %d: %w", i+1, err)
		}
		k.keys[keyFingerprint(key)] = key
	}
	return k, nil
}

func decodeTokenKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if len(b) != TokenKeyBytes {
				return nil, fmt.Errorf("is %d bytes, not %d (make one with: head -c 32 /dev/urandom | base64)", len(b), TokenKeyBytes)
			}
			return b, nil
		}
	}
	return nil, errors.New("is not base64 (make one with: head -c 32 /dev/urandom | base64)")
}

// keyFingerprint names a key in the envelopes it wrapped: 64 bits of a
// SHA-256 that reveal nothing of it.
func keyFingerprint(key []byte) string {
	sum := sha256.Sum256(append([]byte("crank token key\x00"), key...))
	return hex.EncodeToString(sum[:8])
}

// Current is the fingerprint of the key new values are sealed with.
func (k *TokenKeys) Current() string { return k.current }

// envelope is a sealed value as stored.
type envelope struct {
	Version int    `json:"v"`
	Key     string `json:"kek"`  // the wrapping key's fingerprint
	DataKey []byte `json:"dek"`  // nonce || AES-GCM(kek, data key)
	Data    []byte `json:"data"` // nonce || AES-GCM(data key, value)
}

// Seal encrypts plain for the record aad names.
func (k *TokenKeys) Seal(plain, aad []byte) ([]byte, error) {
	dek := make([]byte, TokenKeyBytes)
	_, _ = rand.Read(dek)
	wrapped, err := gcmSeal(k.keys[k.current], dek, append([]byte("dek\x00"), aad...))
	if err != nil {
		return nil, err
	}
	data, err := gcmSeal(dek, plain, append([]byte("data\x00"), aad...))
	if err != nil {
		return nil, err
	}
	return json.Marshal(envelope{Version: 1, Key: k.current, DataKey: wrapped, Data: data})
}

// ErrUnknownTokenKey: a value was sealed with a key that is neither
// token_key nor one of previous_token_keys.
var ErrUnknownTokenKey = errors.New("sealed with a key that is neither token_key nor one of previous_token_keys")

// Open decrypts a value Seal made for the same aad; stale reports that
// it was sealed with a previous key (seal it again).
func (k *TokenKeys) Open(sealed, aad []byte) (plain []byte, stale bool, err error) {
	var e envelope
	if err := json.Unmarshal(sealed, &e); err != nil || e.Version != 1 {
		return nil, false, errors.New("not a sealed value")
	}
	kek, ok := k.keys[e.Key]
	if !ok {
		return nil, false, ErrUnknownTokenKey
	}
	dek, err := gcmOpen(kek, e.DataKey, append([]byte("dek\x00"), aad...))
	if err != nil {
		return nil, false, err
	}
	plain, err = gcmOpen(dek, e.Data, append([]byte("data\x00"), aad...))
	if err != nil {
		return nil, false, err
	}
	return plain, e.Key != k.current, nil
}

func gcmSeal(key, plain, aad []byte) ([]byte, error) {
	g, err := newGCM(key)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, g.NonceSize())
	_, _ = rand.Read(nonce)
	return g.Seal(nonce, nonce, plain, aad), nil
}

func gcmOpen(key, sealed, aad []byte) ([]byte, error) {
	g, err := newGCM(key)
	if err != nil {
		return nil, err
	}
	if len(sealed) < g.NonceSize() {
		return nil, errors.New("sealed value too short")
	}
	out, err := g.Open(nil, sealed[:g.NonceSize()], sealed[g.NonceSize():], aad)
	if err != nil {
		return nil, errors.New("sealed value does not open: altered, or not this record's")
	}
	return out, nil
}

func newGCM(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}
