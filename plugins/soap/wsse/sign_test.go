package wsse

import (
	"crypto/x509"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/beevik/etree"
)

// testSigner loads the test signer name ("sign" for RSA, "sign-ec" for
// ECDSA P-256) from the SOAP adapter's testdata, as the adapter does.
func testSigner(t testing.TB, name string) *Signer {
	t.Helper()
	s, err := LoadSigner(filepath.Join("..", "testdata", name+"-cert.pem"), filepath.Join("..", "testdata", name+"-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// signedEnvelope is a SOAP 1.1 envelope with a Timestamp, a Body with
// namespaced content, signed by s, as sent.
func signedEnvelope(t testing.TB, s *Signer, now time.Time) string {
	t.Helper()
	doc := etree.NewDocument()
	root := doc.CreateElement("soap:Envelope")
	root.CreateAttr("xmlns:soap", "http://schemas.xmlsoap.org/soap/envelope/")
	root.CreateAttr("xmlns:ns1", "urn:crank:calc")
	root.CreateAttr("xmlns:unused", "urn:unused")
	tok := &Token{Username: "alice", Password: "pw", Digest: true, TTL: time.Minute, Signer: s}
	if err := tok.Append(root.CreateElement("soap:Header"), "soap", "1", now, nil); err != nil {
		t.Fatal(err)
	}
	op := root.CreateElement("soap:Body").CreateElement("ns1:Add")
	op.CreateAttr("b", `x "&<`+"\t")
	op.CreateAttr("a", "1")
	op.CreateElement("ns1:a").SetText("1 & <2>\r")
	op.CreateElement("ns1:b")
	doc.Indent(etree.NoIndent)
	if err := tok.Finish(root); err != nil {
		t.Fatal(err)
	}
	doc.WriteSettings.CanonicalText, doc.WriteSettings.CanonicalAttrVal = true, true
	out, err := doc.WriteToString()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSignature: a signed envelope verifies after a parse of what is
// sent, under RSA and ECDSA keys; a changed Body, a changed Timestamp, an
// untrusted certificate, an unsigned message where a signature is
// required and a wrapped Body are refused.
func TestSignature(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for key, otherKey := range map[string]string{"sign": "sign-ec", "sign-ec": "sign"} {
		s, other := testSigner(t, key), testSigner(t, otherKey)
		c := func() *Checker {
			return &Checker{Users: map[string]string{"alice": "pw"}, RequireSignature: true, Certs: []*x509.Certificate{s.Certificate()}}
		}
		env := signedEnvelope(t, s, now)
		if user, f := check(c(), env, now); user != "alice" || f != nil {
			t.Fatalf("%s: %q %v\n%s", key, user, f, env)
		}
		for what, tc := range map[string]struct {
			env, code string
			c         *Checker
		}{
			"changed body":      {strings.Replace(env, "1 &amp; &lt;2&gt;", "9 &amp; &lt;2&gt;", 1), FailedCheck, c()},
			"changed timestamp": {strings.Replace(env, "<wsu:Expires>2026-05-01T12:01:00.000Z", "<wsu:Expires>2026-05-01T13:01:00.000Z", 1), FailedCheck, c()},
			"untrusted":         {env, "SecurityTokenUnavailable", &Checker{Users: map[string]string{"alice": "pw"}, Certs: []*x509.Certificate{other.Certificate()}}},
			"unsigned":          {envelope(t, &Token{Username: "alice", Password: "pw", Digest: true, TTL: time.Minute}, now), InvalidSecurity, c()},
			"wrapped":           {strings.Replace(env, "</soap:Header>", `<x wsu:Id="Body-1" xmlns:wsu="`+NSUtility+`"/></soap:Header>`, 1), FailedCheck, c()},
		} {
			if _, f := check(tc.c, tc.env, now); f == nil || f.Code != tc.code {
				t.Errorf("%s %s: %v", key, what, f)
			}
		}
	}
}

// TestCanonical: exclusive c14n of a subtree declares only the namespaces
// it uses, where first used, sorts attributes by namespace and name, and
// escapes text and attribute values as the recommendation says.
func TestCanonical(t *testing.T) {
	t.Parallel()
	doc := etree.NewDocument()
	if err := doc.ReadFromString(`<r xmlns="urn:d" xmlns:a="urn:a" xmlns:b="urn:b" xmlns:z="urn:z"><a:x b:k="1" k="&#x9;&quot;&amp;" a:j="2"><y>t &amp; &lt; &gt; &#xD;</y><a:w/></a:x></r>`); err != nil {
		t.Fatal(err)
	}
	c, err := Canonical(doc.Root().ChildElements()[0])
	if err != nil {
		t.Fatal(err)
	}
	got := string(c)
	want := `<a:x xmlns:a="urn:a" xmlns:b="urn:b" k="&#x9;&quot;&amp;" a:j="2" b:k="1"><y xmlns="urn:d">t &amp; &lt; &gt; &#xD;</y><a:w></a:w></a:x>`
	if got != want {
		t.Errorf("canonical\n got %s\nwant %s", got, want)
	}
}
