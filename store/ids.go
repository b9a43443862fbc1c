package store

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// ID prefixes of the entities the store names itself. The rest of an ID is
// crypto/rand.Text(): at least 128 random bits in RFC 4648 base32, so IDs
// cannot be guessed or enumerated.
const (
	StreamSessionIDPrefix = "ss_"
	JobIDPrefix           = "job_"
	ownerIDPrefix         = "own_"
)

// newID returns a fresh, unguessable ID with the given prefix.
func newID(prefix string) string { return prefix + rand.Text() }

// wellFormedID reports whether id looks like an ID newID made with prefix.
// Anything else cannot exist, so callers answer ErrNotFound without asking
// etcd (and a hostile ID never reaches a key).
func wellFormedID(id, prefix string) bool {
	rest, ok := strings.CutPrefix(id, prefix)
	if !ok || len(rest) < 26 || len(rest) > 64 {
		return false
	}
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if (c < 'A' || c > 'Z') && (c < '2' || c > '7') {
			return false
		}
	}
	return true
}

// MCPSessionDigest names an MCP session wherever its ID must not appear:
// the ID is the credential of the session's client (whoever holds it acts
// as that session), so logs, error texts, the live-state index and the
// lists and stops of the admin API name a session by this digest of it
// instead — 128 bits of SHA-256, hex — and so does the caller identity
// "session:<digest>" of a session that names no other. The digest
// reveals nothing of the ID and cannot stand in for it.
func MCPSessionDigest(id string) string {
	sum := sha256.Sum256([]byte("crank MCP session agent\x00" + id))
	return hex.EncodeToString(sum[:16])
}

// wellFormedDigest reports whether d looks like an MCPSessionDigest.
func wellFormedDigest(d string) bool {
	if len(d) != 32 {
		return false
	}
	for i := 0; i < len(d); i++ {
		if c := d[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
