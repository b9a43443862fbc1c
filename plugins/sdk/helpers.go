package sdk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Helpers that every adapter needs for its config handling.

// Suggest returns the name in known closest to name (edit distance at most
// 2, and one more for every 12 bytes of name; name compared in lower
// case), or "" when none is close: for "did you mean" hints on unknown
// config fields. It is the one such hint of the gateway and the SDK.
func Suggest(name string, known []string) string {
	best, bestD := "", 3+len(name)/12
	ln := strings.ToLower(name)
	for _, k := range known {
		if d := EditDistance(ln, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// EditDistance is the Levenshtein distance between a and b, in bytes.
func EditDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// ScalarText renders a JSON string, number or boolean as plain text (a
// string without its quotes); other values are refused.
func ScalarText(v json.RawMessage) (string, bool) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || v[0] == '{' || v[0] == '[' || bytes.Equal(v, []byte("null")) {
		return "", false
	}
	if v[0] == '"' {
		var s string
		if json.Unmarshal(v, &s) != nil {
			return "", false
		}
		return s, true
	}
	return string(v), true
}

// ReadFile reads a file a config names (a document, a schema, a
// certificate), at most max bytes. Its errors say why without repeating
// the path ("no such file or directory", "it is a directory", "larger
// than 16 MiB"), so the caller names the file as the operator wrote it:
// "cannot read %s: %v".
func ReadFile(path string, max int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return nil, pe.Err
		}
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return nil, errors.New("it is a directory")
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > max {
		return nil, fmt.Errorf("larger than %s", sizeText(max))
	}
	return b, nil
}

// sizeText renders a byte count in the largest whole binary unit.
func sizeText(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// Describe is d with the JSON Schema of c's config (Schema) as its
// ConfigSchema: what an adapter's Describe answers.
//
//	func (a *adapter) Describe(context.Context) (*sdk.Description, error) {
//		return a.configs.Describe(sdk.Description{Name: name, Version: version, Modes: []sdk.Mode{sdk.ModeUnary}})
//	}
func (c *Config[C, P]) Describe(d Description) (*Description, error) {
	schema, err := c.Schema()
	if err != nil {
		return nil, err
	}
	d.ConfigSchema = schema
	return &d, nil
}
