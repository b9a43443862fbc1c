package httpadapter

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// MaxRedirects is how many redirects [SameOriginRedirects] follows.
const MaxRedirects = 5

// A RedirectError is a redirect [SameOriginRedirects] refused. Its message
// names origins only (scheme and host): a URL's path or query may carry a
// secret.
type RedirectError struct {
	// From is the origin of the first request; To the origin of the
	// redirect's target, "" when the error is that there were too many.
	From, To string
}

func (e *RedirectError) Error() string {
	if e.To == "" {
		return fmt.Sprintf("stopped after %d redirects from %s", MaxRedirects, e.From)
	}
	return fmt.Sprintf("%s answered a redirect to another origin (%s), which is not followed "+
		"(configured headers are never sent to another origin): configure the final URL", e.From, e.To)
}

// SameOriginRedirects is an http.Client's CheckRedirect for an adapter
// whose requests carry configured headers (credentials): it follows at
// most [MaxRedirects] redirects, each within the origin (scheme, host and
// port) of the first request, so those headers never reach another host.
// Any other redirect is refused with a *[RedirectError]. (An adapter that
// wants to answer such a redirect as the upstream's status instead returns
// http.ErrUseLastResponse for it.)
func SameOriginRedirects(req *http.Request, via []*http.Request) error {
	first := via[0].URL
	if !SameOrigin(req.URL, first) {
		return &RedirectError{From: Origin(first), To: Origin(req.URL)}
	}
	if len(via) >= MaxRedirects {
		return &RedirectError{From: Origin(first)}
	}
	return nil
}

// SameOrigin reports whether two absolute URLs have the same scheme, host
// and port (as written: http://a and http://a:80 are two origins).
func SameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Host, b.Host)
}

// Origin is the scheme://host[:port] of u, without userinfo, path, query
// or fragment.
func Origin(u *url.URL) string {
	return (&url.URL{Scheme: strings.ToLower(u.Scheme), Host: u.Host}).String()
}
