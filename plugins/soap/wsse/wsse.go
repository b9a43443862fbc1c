// Package wsse is the WS-Security the SOAP adapter speaks (OASIS WSS 1.0
// SOAP Message Security and the UsernameToken Profile): the wsse:Security
// header it sends — a UsernameToken with its password as text or digest,
// with a Nonce and Created, and a wsu:Timestamp — and a Checker that
// verifies such a header as a service does, for the adapter's tests, the
// end-to-end tests and the demo SOAP service; optionally an X.509
// signature (XML-DSig) of the Body and the Timestamp (sign.go, with the
// exclusive canonicalization of c14n.go).
//
// The password digest is Base64(SHA-1(nonce + created + password)), the
// nonce its raw bytes (sent base64), created the text of wsse:Created.
package wsse

import (
	"crypto/rand"
	"crypto/sha1" //nolint:gosec // the UsernameToken Profile 1.0 defines the digest with SHA-1
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/beevik/etree"
)

// Namespaces and URIs of WS-Security 1.0.
const (
	NS             = "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-secext-1.0.xsd"
	NSUtility      = "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-utility-1.0.xsd"
	PasswordText   = "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-username-token-profile-1.0#PasswordText"
	PasswordDigest = "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-username-token-profile-1.0#PasswordDigest"
	Base64Binary   = "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-soap-message-security-1.0#Base64Binary"
)

// TimeFormat is how Created and Expires are written: UTC, milliseconds.
const TimeFormat = "2006-01-02T15:04:05.000Z"

// nonceBytes is the size of a fresh nonce.
const nonceBytes = 16

// Digest is a UsernameToken's PasswordDigest: Base64(SHA-1(nonce +
// created + password)).
func Digest(nonce []byte, created, password string) string {
	h := sha1.New() //nolint:gosec // as the profile defines it
	h.Write(nonce)
	h.Write([]byte(created))
	h.Write([]byte(password))
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

// Token is what a wsse:Security header carries. The zero Token carries
// nothing.
type Token struct {
	// Username, when set, sends a UsernameToken with Password.
	Username, Password string
	// Digest sends the password as a PasswordDigest (with Nonce and
	// Created, which a digest always has); otherwise as PasswordText.
	Digest bool
	// Nonce adds a Nonce and Created to a PasswordText token.
	Nonce bool
	// TTL, when positive, adds a wsu:Timestamp that expires TTL after it
	// was created.
	TTL time.Duration
	// Signer, when set, signs the Body and the Timestamp (Finish).
	Signer *Signer
}

// Finish completes the header once the envelope is: with a Signer, it
// signs the Body and the Timestamp.
func (t *Token) Finish(envelope *etree.Element) error {
	if t.Signer == nil {
		return nil
	}
	return t.Signer.Sign(envelope)
}

// Append writes the wsse:Security header of t into header (a SOAP Header
// element), created now; mustUnderstand is the attribute's value for the
// SOAP version ("1" for 1.1, "true" for 1.2), soapPrefix the envelope's
// prefix. Nonces come from random (crypto/rand when nil).
func (t *Token) Append(header *etree.Element, soapPrefix, mustUnderstand string, now time.Time, random io.Reader) error {
	if random == nil {
		random = rand.Reader
	}
	s := header.CreateElement("wsse:Security")
	s.CreateAttr("xmlns:wsse", NS)
	s.CreateAttr("xmlns:wsu", NSUtility)
	s.CreateAttr(soapPrefix+":mustUnderstand", mustUnderstand)
	created := now.UTC().Format(TimeFormat)
	if t.TTL > 0 {
		ts := s.CreateElement("wsu:Timestamp")
		ts.CreateAttr("wsu:Id", "TS-1")
		ts.CreateElement("wsu:Created").SetText(created)
		ts.CreateElement("wsu:Expires").SetText(now.Add(t.TTL).UTC().Format(TimeFormat))
	}
	if t.Username == "" {
		return nil
	}
	ut := s.CreateElement("wsse:UsernameToken")
	ut.CreateAttr("wsu:Id", "UT-1")
	ut.CreateElement("wsse:Username").SetText(t.Username)
	pw := ut.CreateElement("wsse:Password")
	if !t.Digest && !t.Nonce {
		pw.CreateAttr("Type", PasswordText)
		pw.SetText(t.Password)
		return nil
	}
	nonce := make([]byte, nonceBytes)
	if _, err := io.ReadFull(random, nonce); err != nil {
		return err
	}
	if t.Digest {
		pw.CreateAttr("Type", PasswordDigest)
		pw.SetText(Digest(nonce, created, t.Password))
	} else {
		pw.CreateAttr("Type", PasswordText)
		pw.SetText(t.Password)
	}
	n := ut.CreateElement("wsse:Nonce")
	n.CreateAttr("EncodingType", Base64Binary)
	n.SetText(base64.StdEncoding.EncodeToString(nonce))
	ut.CreateElement("wsu:Created").SetText(created)
	return nil
}

// Fault codes a Checker answers (their local names; the wsse or wsu
// prefix is the service's to write), and the adapter recognises.
const (
	FailedAuthentication = "FailedAuthentication"
	InvalidSecurity      = "InvalidSecurity"
	MessageExpired       = "MessageExpired"
	FailedCheck          = "FailedCheck"
)

// SecurityFault reports whether a SOAP fault code (its local name) is one
// of WS-Security's, which says the service refused the security header.
func SecurityFault(code string) bool {
	switch code {
	case FailedAuthentication, InvalidSecurity, MessageExpired, FailedCheck, "InvalidSecurityToken",
		"SecurityTokenUnavailable", "UnsupportedSecurityToken", "UnsupportedAlgorithm":
		return true
	}
	return false
}

// Fault is why a Checker refused a header.
type Fault struct{ Code, Reason string }

// Checker verifies the wsse:Security header of request envelopes as a
// service does. It is safe for concurrent use.
type Checker struct {
	// Users maps usernames to passwords.
	Users map[string]string
	// RequireDigest refuses PasswordText tokens.
	RequireDigest bool
	// RequireTimestamp refuses a header without a wsu:Timestamp.
	RequireTimestamp bool
	// MaxAge bounds how old a token's Created may be; default 5 minutes.
	MaxAge time.Duration
	// RequireSignature refuses a message whose Body and Timestamp are not
	// signed by one of Certs; a signature present is checked either way.
	RequireSignature bool
	Certs            []*x509.Certificate

	mu   sync.Mutex
	seen map[string]time.Time // nonces seen within MaxAge, for replays
}

// clockSkew is how far in the future a Created may be.
const clockSkew = time.Minute

// Check verifies envelope's security header at now. It returns the
// authenticated username ("" when the header carries no UsernameToken and
// none is required by Users), or the fault to answer.
func (c *Checker) Check(envelope *etree.Element, now time.Time) (string, *Fault) {
	maxAge := c.MaxAge
	if maxAge <= 0 {
		maxAge = 5 * time.Minute
	}
	var sec *etree.Element
	for _, h := range envelope.ChildElements() {
		if h.Tag != "Header" {
			continue
		}
		for _, s := range h.ChildElements() {
			if s.Tag == "Security" && s.NamespaceURI() == NS {
				sec = s
			}
		}
	}
	if sec == nil {
		return "", &Fault{InvalidSecurity, "the message has no wsse:Security header"}
	}
	p := partsOf(sec)
	ts, ut := p.timestamp, p.usernameToken
	if ts != nil {
		created, err1 := time.Parse(time.RFC3339Nano, text(ts, "Created"))
		expires, err2 := time.Parse(time.RFC3339Nano, text(ts, "Expires"))
		switch {
		case err1 != nil || err2 != nil:
			return "", &Fault{InvalidSecurity, "the wsu:Timestamp's Created or Expires is not a date-time"}
		case !now.Before(expires):
			return "", &Fault{MessageExpired, "the message's wsu:Timestamp has expired"}
		case created.After(now.Add(clockSkew)):
			return "", &Fault{InvalidSecurity, "the message's wsu:Timestamp was created in the future"}
		}
	} else if c.RequireTimestamp {
		return "", &Fault{InvalidSecurity, "the message has no wsu:Timestamp"}
	}
	if p.signature != nil || c.RequireSignature {
		if f := checkSignature(envelope, p, c.Certs); f != nil {
			return "", f
		}
	}
	if ut == nil {
		if len(c.Users) > 0 {
			return "", &Fault{FailedAuthentication, "the message has no UsernameToken"}
		}
		return "", nil
	}
	user := text(ut, "Username")
	var pw *etree.Element
	for _, e := range ut.ChildElements() {
		if e.Tag == "Password" {
			pw = e
		}
	}
	want, known := c.Users[user]
	if pw == nil || !known {
		return "", &Fault{FailedAuthentication, "the security token could not be authenticated"}
	}
	got := strings.TrimSpace(pw.Text())
	nonceText, createdText := text(ut, "Nonce"), text(ut, "Created")
	digest := pw.SelectAttrValue("Type", PasswordText) == PasswordDigest
	if c.RequireDigest && !digest {
		return "", &Fault{FailedAuthentication, "the service requires a PasswordDigest"}
	}
	if digest || nonceText != "" {
		nonce, err := base64.StdEncoding.DecodeString(nonceText)
		created, cerr := time.Parse(time.RFC3339Nano, createdText)
		switch {
		case err != nil || len(nonce) == 0 || cerr != nil:
			return "", &Fault{InvalidSecurity, "the UsernameToken's Nonce or Created is missing or malformed"}
		case created.Before(now.Add(-maxAge)) || created.After(now.Add(clockSkew)):
			return "", &Fault{MessageExpired, "the UsernameToken's Created is too old or in the future"}
		case !c.fresh(nonceText, now, maxAge):
			return "", &Fault{FailedAuthentication, "the UsernameToken's Nonce was used before"}
		}
		if digest {
			want = Digest(nonce, createdText, want)
		}
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return "", &Fault{FailedAuthentication, "the security token could not be authenticated"}
	}
	return user, nil
}

// securityParts are the children of a wsse:Security header a check reads.
type securityParts struct {
	timestamp, usernameToken, signature, binaryToken *etree.Element
}

func partsOf(sec *etree.Element) securityParts {
	var p securityParts
	for _, e := range sec.ChildElements() {
		switch {
		case e.Tag == "Signature" && e.NamespaceURI() == NSDSig:
			p.signature = e
		case e.Tag == "Timestamp" && e.NamespaceURI() == NSUtility:
			p.timestamp = e
		case e.Tag == "UsernameToken" && e.NamespaceURI() == NS:
			p.usernameToken = e
		case e.Tag == "BinarySecurityToken" && e.NamespaceURI() == NS:
			p.binaryToken = e
		}
	}
	return p
}

// fresh records a nonce and reports whether it was new; nonces older than
// maxAge are forgotten (their tokens are refused as too old anyway).
func (c *Checker) fresh(nonce string, now time.Time, maxAge time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[string]time.Time{}
	}
	for n, at := range c.seen {
		if at.Before(now.Add(-maxAge - clockSkew)) {
			delete(c.seen, n)
		}
	}
	if _, ok := c.seen[nonce]; ok {
		return false
	}
	c.seen[nonce] = now
	return true
}

func text(el *etree.Element, tag string) string {
	for _, e := range el.ChildElements() {
		if e.Tag == tag {
			return strings.TrimSpace(e.Text())
		}
	}
	return ""
}
