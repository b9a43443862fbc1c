package store

import (
	"crypto/rand"
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
