package host

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"sync"

	"github.com/crankmcp/crank/host/window"
)

// The cursors the host hands to clients — a window's cursor, a session
// poll's, the tasks/list position — are sealed: the value, then an
// HMAC-SHA256 tag over what the cursor is for, what it is bound to and the
// value, keyed with a key every replica shares (KeyStore). A cursor comes
// back only as the host issued it; one a client made up or edited, or one
// issued for another tool, session or caller, is refused with an error
// naming the cursor before anything is read or acknowledged, so a client
// never chooses what reaches an upstream as a cursor (an SSE
// Last-Event-ID, a poll's cursor parameter, a WebSocket subscription's
// {{cursor}}) nor which items a poll acknowledges. Sealing does not hide
// the value (a window's upstream cursor is readable, and redacted like
// any text); it only authenticates it.
//
//	crank2:<base64url value>.<base64url 128-bit tag>
//
// What each cursor is bound to:
//
//   - a window's cursor: the workspace and the tool. It is a position in
//     the tool's upstream, not a credential, so any caller of the tool in
//     the workspace may continue from it (the upstream call is made with
//     that caller's own identity and credentials, as every call is).
//   - a session poll's cursor: the session (which only its agent, or its
//     workspace, can poll at all).
//   - a tasks/list position: the workspace and the agent.
//   - an input-required result's request state (input.go): the workspace,
//     the agent, the tool and the arguments.
//
// Cursors issued before sealing (plain upstream cursors, "crank1:…") are
// refused: the client starts a fresh window or poll without a cursor.

// KeyStore holds the secret keys every replica of a fleet shares
// (store.Etcd).
type KeyStore interface {
	SharedKey(ctx context.Context, name string) ([]byte, error)
}

// cursorKeyName is the shared key cursors are sealed with.
const cursorKeyName = "cursors"

// What a cursor is for: one sealed for one purpose is refused by another.
const (
	windowCursor   = "window"
	pollCursor     = "poll"
	taskListCursor = "tasks/list"
)

const (
	sealedCursorPrefix = "crank2:"
	cursorTagBytes     = 16
)

// localCursorKey seals the cursors of a host without a store (tests, a
// standalone host): they are valid in this process only. The gateway
// always has a store.
var localCursorKey = sync.OnceValue(func() []byte {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return b
})

// cursorKey returns the key cursors are sealed with: the store's shared
// key (read once per process), so that any replica checks what another
// issued.
func (h *Host) cursorKey(ctx context.Context) ([]byte, error) {
	if h.store == nil {
		return localCursorKey(), nil
	}
	return h.store.SharedKey(ctx, cursorKeyName)
}

// sealCursor returns value sealed for purpose, bound to bind.
func sealCursor(key []byte, purpose string, bind []string, value string) string {
	enc := base64.RawURLEncoding
	return sealedCursorPrefix + enc.EncodeToString([]byte(value)) + "." + enc.EncodeToString(cursorTag(key, purpose, bind, value))
}

// openCursor returns the value of a cursor sealCursor made with the same
// key, purpose and bind, and whether it is one.
func openCursor(key []byte, purpose string, bind []string, sealed string) (string, bool) {
	rest, ok := strings.CutPrefix(sealed, sealedCursorPrefix)
	if !ok {
		return "", false
	}
	v, t, ok := strings.Cut(rest, ".")
	enc := base64.RawURLEncoding.Strict() // one encoding per cursor
	value, err1 := enc.DecodeString(v)
	tag, err2 := enc.DecodeString(t)
	if !ok || err1 != nil || err2 != nil || !hmac.Equal(tag, cursorTag(key, purpose, bind, string(value))) {
		return "", false
	}
	return string(value), true
}

// cursorTag is the tag of a cursor: every field length-prefixed, so that
// no two (purpose, bind, value) share an input.
func cursorTag(key []byte, purpose string, bind []string, value string) []byte {
	m := hmac.New(sha256.New, key)
	var b []byte
	for _, f := range append(append([]string{"crank cursor", purpose}, bind...), value) {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	m.Write(b)
	return m.Sum(nil)[:cursorTagBytes]
}

// sealWindowCursor is the cursor a window of tool in workspace returns
// (cursor.go); "" for the zero state.
func sealWindowCursor(key []byte, workspace, tool string, st window.Position) string {
	if st == (window.Position{}) {
		return ""
	}
	b, _ := json.Marshal(st)
	return sealCursor(key, windowCursor, []string{workspace, tool}, string(b))
}

// errForeignCursor refuses a cursor argument no window of the tool (in
// the workspace) returned.
var errForeignCursor = errors.New("not a cursor this tool returned (pass the cursor of its previous window unchanged, or leave it out to start afresh)")

// openWindowCursor reads a cursor argument of tool in workspace: one
// sealWindowCursor made, else errForeignCursor.
func openWindowCursor(key []byte, workspace, tool, s string) (window.Position, error) {
	if s == "" {
		return window.Position{}, nil
	}
	v, ok := openCursor(key, windowCursor, []string{workspace, tool}, s)
	var st window.Position
	if !ok || json.Unmarshal([]byte(v), &st) != nil || st.Skip < 0 || st.Skip > window.MaxItemsLimit {
		return window.Position{}, errForeignCursor
	}
	return st, nil
}
