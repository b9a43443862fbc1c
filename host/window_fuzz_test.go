package host

import (
	"testing"
	"unicode/utf8"

	"github.com/crankmcp/crank/host/window"
)

// FuzzWindowCursor feeds the window's cursor check what a client may send
// back as a cursor argument: it never panics, and refuses with the clear
// error everything but a cursor a window of the same tool and workspace
// returned — made-up text, the formats of earlier releases, a cursor with
// any byte changed, one of another tool or workspace. Every cursor a
// window returns opens to the state it was made from.
func FuzzWindowCursor(f *testing.F) {
	key := []byte("0123456789abcdef0123456789abcdef")
	f.Add("", "", 0, 0)
	f.Add("crank1:", "page-2", 3, 1)
	f.Add("crank1:eyJjIjoieCIsInMiOjJ9", "", 1, 7)
	f.Add("crank1:!!", "c", 1000, 2)
	f.Add("plain-upstream-cursor", "crank1:inner", 7, 40)
	f.Add("crank2:eyJjIjoieCJ9.AAAAAAAAAAAAAAAAAAAAAA", "x", 0, 12)
	f.Add(sealWindowCursor(key, "ws", "tool", window.Position{Cursor: "42"}), "42", 0, 9)
	f.Fuzz(func(t *testing.T, sent, upstream string, skip, flip int) {
		if st, err := openWindowCursor(key, "ws", "tool", sent); err != nil {
			if err != errForeignCursor {
				t.Fatalf("openWindowCursor(%q): unexpected error %v", sent, err)
			}
		} else if st.Skip < 0 || st.Skip > window.MaxItemsLimit {
			t.Fatalf("openWindowCursor(%q) = skip %d, out of range", sent, st.Skip)
		} else if sent != "" && sent != sealWindowCursor(key, "ws", "tool", st) {
			t.Fatalf("openWindowCursor took %q, which no window returned", sent)
		}
		if skip < 0 || skip > window.MaxItemsLimit || !utf8.ValidString(upstream) {
			return // a window makes no such cursor (upstream cursors are protocol strings: UTF-8)
		}
		want := window.Position{Cursor: upstream, Skip: skip}
		c := sealWindowCursor(key, "ws", "tool", want)
		if want == (window.Position{}) {
			if c != "" {
				t.Fatalf("the zero state sealed to %q", c)
			}
			return
		}
		if st, err := openWindowCursor(key, "ws", "tool", c); err != nil || st != want {
			t.Fatalf("round trip of %+v gave %+v, %v", want, st, err)
		}
		for _, other := range [][2]string{{"ws2", "tool"}, {"ws", "tool2"}, {"wst", "ool"}} {
			if _, err := openWindowCursor(key, other[0], other[1], c); err != errForeignCursor {
				t.Fatalf("a cursor of (ws, tool) opened for %v: %v", other, err)
			}
		}
		b := []byte(c)
		i := len(sealedCursorPrefix) + (flip&0x7fffffff)%(len(b)-len(sealedCursorPrefix))
		b[i] ^= byte(1 + flip>>8&0x3f)
		if _, err := openWindowCursor(key, "ws", "tool", string(b)); err == nil && string(b) != c {
			t.Fatalf("an edited cursor %q (of %q) was taken", b, c)
		}
	})
}
