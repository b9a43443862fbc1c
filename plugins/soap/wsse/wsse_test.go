package wsse

import (
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/beevik/etree"
)

// envelope is a SOAP 1.1 envelope with t's header, created at now.
func envelope(t testing.TB, tok *Token, now time.Time) string {
	doc := etree.NewDocument()
	root := doc.CreateElement("soap:Envelope")
	root.CreateAttr("xmlns:soap", "http://schemas.xmlsoap.org/soap/envelope/")
	if err := tok.Append(root.CreateElement("soap:Header"), "soap", "1", now, nil); err != nil {
		t.Fatal(err)
	}
	root.CreateElement("soap:Body")
	s, err := doc.WriteToString()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func check(c *Checker, env string, now time.Time) (string, *Fault) {
	doc := etree.NewDocument()
	if err := doc.ReadFromString(env); err != nil || doc.Root() == nil {
		return "", &Fault{Code: "parse"}
	}
	return c.Check(doc.Root(), now)
}

// TestRoundTrip: what Append writes, a Checker with the same password
// accepts, once; another password, a replay, an old token or an expired
// Timestamp it refuses with the fault that says why.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, tok := range []Token{
		{Username: "alice", Password: "pw"},
		{Username: "alice", Password: "pw", Nonce: true},
		{Username: "alice", Password: "pw", Digest: true, TTL: time.Minute},
	} {
		c := &Checker{Users: map[string]string{"alice": "pw"}}
		env := envelope(t, &tok, now)
		if tok.Digest && strings.Contains(env, ">pw<") {
			t.Errorf("a digest token carries the password: %s", env)
		}
		if user, f := check(c, env, now.Add(time.Second)); user != "alice" || f != nil {
			t.Errorf("%+v: %q %v\n%s", tok, user, f, env)
		}
		if tok.Nonce || tok.Digest {
			if _, f := check(c, env, now.Add(time.Second)); f == nil || f.Code != FailedAuthentication {
				t.Errorf("%+v replayed: %v", tok, f)
			}
			if _, f := check(&Checker{Users: c.Users}, env, now.Add(time.Hour)); f == nil || f.Code != MessageExpired {
				t.Errorf("%+v an hour later: %v", tok, f)
			}
		}
		if _, f := check(&Checker{Users: map[string]string{"alice": "other"}}, env, now); f == nil || f.Code != FailedAuthentication {
			t.Errorf("%+v with another password: %v", tok, f)
		}
	}
	// A Timestamp alone, and its expiry.
	env := envelope(t, &Token{TTL: time.Minute}, now)
	if _, f := check(&Checker{RequireTimestamp: true}, env, now.Add(30*time.Second)); f != nil {
		t.Errorf("timestamp: %v", f)
	}
	if _, f := check(&Checker{}, env, now.Add(2*time.Minute)); f == nil || f.Code != MessageExpired {
		t.Errorf("an expired timestamp: %v", f)
	}
	if _, f := check(&Checker{RequireDigest: true, Users: map[string]string{"alice": "pw"}}, envelope(t, &Token{Username: "alice", Password: "pw"}, now), now); f == nil || f.Code != FailedAuthentication {
		t.Errorf("a text token where a digest is required: %v", f)
	}
}

// TestDigestVector: the profile's digest of a known nonce, created and
// password (the UsernameToken Profile 1.0 formula, computed independently
// with `printf` and `openssl sha1 -binary | base64`).
func TestDigestVector(t *testing.T) {
	t.Parallel()
	if got := Digest([]byte("nonce-123"), "2026-05-01T12:00:00.000Z", "pw"); got != digestVector {
		t.Errorf("digest = %s, want %s", got, digestVector)
	}
}

// FuzzCheck reads arbitrary envelopes: Check never panics, and accepts a
// UsernameToken only with the right password (its digest or text).
func FuzzCheck(f *testing.F) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, tok := range []Token{{Username: "alice", Password: "pw"}, {Username: "alice", Password: "pw", Digest: true, TTL: time.Minute}, {TTL: time.Second}} {
		f.Add(envelope(f, &tok, now))
	}
	f.Add(`<e><Header><Security xmlns="` + NS + `"><UsernameToken><Username>alice</Username><Password Type="` + PasswordDigest + `">x</Password><Nonce>!!</Nonce></UsernameToken></Security></Header></e>`)
	f.Add(`<e><Header><Security xmlns="` + NS + `"><Timestamp xmlns="` + NSUtility + `"><Created>x</Created></Timestamp></Security></Header></e>`)
	signer := testSigner(f, "sign")
	f.Add(signedEnvelope(f, signer, now))
	f.Fuzz(func(t *testing.T, env string) {
		c := &Checker{Users: map[string]string{"alice": "pw"}, Certs: []*x509.Certificate{signer.Certificate()}}
		user, fault := check(c, env, now)
		if fault == nil && user != "" && user != "alice" {
			t.Fatalf("accepted user %q", user)
		}
		if fault == nil && user == "alice" && !strings.Contains(env, "pw") && !strings.Contains(env, "Digest") {
			t.Fatalf("accepted alice without her password: %s", env)
		}
	})
}

const digestVector = "djgjqKuLoC2lDsmhlRy4rosydgI="
