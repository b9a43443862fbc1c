package servercard

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
)

// Serve answers r with the document doc of the media type: GET and HEAD
// with a strong ETag (304 when If-None-Match names it), caching for an
// hour, and CORS for any origin, which the drafts ask of discovery
// documents (they are public and read-only); an OPTIONS preflight 204;
// any other method 405.
func Serve(w http.ResponseWriter, r *http.Request, doc []byte, mediaType string) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
	h.Set("Access-Control-Allow-Headers", "Accept, Content-Type, If-None-Match, MCP-Protocol-Version")
	h.Set("Access-Control-Expose-Headers", "ETag")
	switch r.Method {
	case http.MethodOptions:
		h.Set("Access-Control-Max-Age", "86400")
		w.WriteHeader(http.StatusNoContent)
		return
	case http.MethodGet, http.MethodHead:
	default:
		h.Set("Allow", "GET, HEAD, OPTIONS")
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	tag := ETag(doc)
	h.Set("ETag", tag)
	h.Set("Cache-Control", "public, max-age=3600")
	h.Set("X-Content-Type-Options", "nosniff")
	if matches(r.Header.Values("If-None-Match"), tag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", mediaType)
	h.Set("Content-Length", strconv.Itoa(len(doc)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(doc)
	}
}

// ETag is a document's strong entity tag: the start of its SHA-256.
func ETag(doc []byte) string {
	sum := sha256.Sum256(doc)
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}

// matches reports whether an If-None-Match header names tag (weak
// comparison, RFC 9110 §13.1.2), or is "*".
func matches(values []string, tag string) bool {
	for _, v := range values {
		for _, t := range strings.Split(v, ",") {
			t = strings.TrimSpace(t)
			if t == "*" || strings.TrimPrefix(t, "W/") == tag {
				return true
			}
		}
	}
	return false
}
