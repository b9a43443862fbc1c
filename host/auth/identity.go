package auth

import (
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
)

// Identity is who a verified token speaks for.
type Identity struct {
	// User identifies the user: the issuer's user claim (sub unless
	// configured) behind the issuer's user prefix. It is the caller's
	// identity ("user:<User>").
	User string
	// Issuer and Subject are the token's iss and sub.
	Issuer, Subject string
	// Scopes are the scopes the token grants.
	Scopes []string
	// Claims are the token's claims (an introspection answer's members for
	// an opaque token), for policies.
	Claims map[string]any
	// Expiry is when the token expires (zero: not said).
	Expiry time.Time

	// validUntil: reuse of the verification ends then (exp plus leeway,
	// or an introspection answer's short life).
	validUntil time.Time
	// pb is Claims for policies, made once.
	pb     *structpb.Struct
	pbOnce sync.Once
	// token is the bearer token itself: a credential, kept only to be
	// exchanged for upstream tokens (RFC 8693).
	token string
}

// Token returns the bearer token the identity was verified from. It is a
// credential: never log it, never send it to an upstream.
func (id *Identity) Token() string {
	if id == nil {
		return ""
	}
	return id.token
}

// String names the identity without its token.
func (id *Identity) String() string {
	if id == nil {
		return "<none>"
	}
	return "user " + id.User + " (issuer " + id.Issuer + ")"
}

// claims returns Claims as policies read them.
func (id *Identity) claims() *structpb.Struct {
	id.pbOnce.Do(func() {
		var err error
		if id.pb, err = structpb.NewStruct(id.Claims); err != nil {
			id.pb = noClaims
		}
	})
	return id.pb
}

func (id *Identity) missingScopes(need []string) []string {
	var out []string
	for _, s := range need {
		if !slices.Contains(id.Scopes, s) {
			out = append(out, s)
		}
	}
	return out
}

// scopesOf reads the scopes of claims: "scope" (a space-separated string,
// RFC 8693 / RFC 9068) or "scp" (a string or a list, as some issuers
// write it).
func scopesOf(claims map[string]any) []string {
	var out []string
	add := func(v any) {
		switch v := v.(type) {
		case string:
			out = append(out, strings.Fields(v)...)
		case []any:
			for _, e := range v {
				if s, ok := e.(string); ok && s != "" {
					out = append(out, s)
				}
			}
		}
	}
	add(claims["scope"])
	add(claims["scp"])
	slices.Sort(out)
	return slices.Compact(out)
}

// audiencesOf reads aud: a string or a list of strings.
func audiencesOf(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
