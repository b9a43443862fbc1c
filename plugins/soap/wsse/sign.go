package wsse

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"errors"
	"fmt"
	"math/big"
	"strings"

	"github.com/beevik/etree"
)

// XML-DSig and the X.509 Token Profile, as the signatures here use them:
// exclusive c14n, SHA-256 digests, RSA or ECDSA (P-256) with SHA-256, the
// certificate sent as a BinarySecurityToken the KeyInfo refers to.
const (
	NSDSig         = "http://www.w3.org/2000/09/xmldsig#"
	AlgExcC14N     = "http://www.w3.org/2001/10/xml-exc-c14n#"
	AlgSHA256      = "http://www.w3.org/2001/04/xmlenc#sha256"
	AlgRSASHA256   = "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"
	AlgECDSASHA256 = "http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha256"
	X509v3         = "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-x509-token-profile-1.0#X509v3"
)

// The wsu:Ids of what a signed envelope carries.
const (
	idBody      = "Body-1"
	idTimestamp = "TS-1"
	idToken     = "X509-1"
)

// Signer signs an envelope's Body and Timestamp with an X.509 key.
type Signer struct {
	cert *x509.Certificate
	key  crypto.Signer
	alg  string
}

// LoadSigner reads a PEM certificate and its private key (RSA or ECDSA
// P-256). Its errors never quote the key.
func LoadSigner(certFile, keyFile string) (*Signer, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, errors.New("cannot load the certificate and key: " + strings.TrimPrefix(err.Error(), "tls: "))
	}
	cert := pair.Leaf
	if cert == nil {
		if cert, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, fmt.Errorf("cannot parse the certificate: %v", err)
		}
	}
	s := &Signer{cert: cert}
	switch k := pair.PrivateKey.(type) {
	case *rsa.PrivateKey:
		s.key, s.alg = k, AlgRSASHA256
	case *ecdsa.PrivateKey:
		if k.Curve.Params().BitSize != 256 {
			return nil, errors.New("an ECDSA key must be on P-256")
		}
		s.key, s.alg = k, AlgECDSASHA256
	default:
		return nil, errors.New("the key must be RSA or ECDSA P-256")
	}
	return s, nil
}

// Certificate is the signer's certificate.
func (s *Signer) Certificate() *x509.Certificate { return s.cert }

// Sign signs the envelope's Body (and the Timestamp of its wsse:Security
// header, when it has one), which must be complete: nothing may change
// after. It adds the BinarySecurityToken and the ds:Signature to the
// header.
func (s *Signer) Sign(envelope *etree.Element) error {
	var sec, body *etree.Element
	for _, c := range envelope.ChildElements() {
		switch c.Tag {
		case "Header":
			for _, h := range c.ChildElements() {
				if h.Tag == "Security" && h.NamespaceURI() == NS {
					sec = h
				}
			}
		case "Body":
			body = c
		}
	}
	if sec == nil || body == nil {
		return errors.New("the envelope has no wsse:Security header or no Body")
	}
	body.CreateAttr("xmlns:wsu", NSUtility)
	body.CreateAttr("wsu:Id", idBody)
	bst := etree.NewElement("wsse:BinarySecurityToken")
	bst.CreateAttr("EncodingType", Base64Binary)
	bst.CreateAttr("ValueType", X509v3)
	bst.CreateAttr("wsu:Id", idToken)
	bst.SetText(base64.StdEncoding.EncodeToString(s.cert.Raw))
	sec.InsertChildAt(0, bst)

	sig := sec.CreateElement("ds:Signature")
	sig.CreateAttr("xmlns:ds", NSDSig)
	si := sig.CreateElement("ds:SignedInfo")
	si.CreateElement("ds:CanonicalizationMethod").CreateAttr("Algorithm", AlgExcC14N)
	si.CreateElement("ds:SignatureMethod").CreateAttr("Algorithm", s.alg)
	refs := []*etree.Element{body}
	for _, c := range sec.ChildElements() {
		if c.Tag == "Timestamp" && c.NamespaceURI() == NSUtility {
			refs = append([]*etree.Element{c}, refs...)
		}
	}
	for _, el := range refs {
		ref := si.CreateElement("ds:Reference")
		ref.CreateAttr("URI", "#"+el.SelectAttrValue("wsu:Id", ""))
		ref.CreateElement("ds:Transforms").CreateElement("ds:Transform").CreateAttr("Algorithm", AlgExcC14N)
		ref.CreateElement("ds:DigestMethod").CreateAttr("Algorithm", AlgSHA256)
		c, err := Canonical(el)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(c)
		ref.CreateElement("ds:DigestValue").SetText(base64.StdEncoding.EncodeToString(sum[:]))
	}
	c, err := Canonical(si)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(c)
	value, err := s.key.Sign(rand.Reader, sum[:], crypto.SHA256)
	if err != nil {
		return fmt.Errorf("cannot sign: %v", err)
	}
	if s.alg == AlgECDSASHA256 {
		// XML-DSig writes an ECDSA signature as r and s, 32 bytes each.
		var rs struct{ R, S *big.Int }
		if _, err := asn1.Unmarshal(value, &rs); err != nil {
			return fmt.Errorf("cannot sign: %v", err)
		}
		value = make([]byte, 64)
		rs.R.FillBytes(value[:32])
		rs.S.FillBytes(value[32:])
	}
	sig.CreateElement("ds:SignatureValue").SetText(base64.StdEncoding.EncodeToString(value))
	str := sig.CreateElement("ds:KeyInfo").CreateElement("wsse:SecurityTokenReference")
	r := str.CreateElement("wsse:Reference")
	r.CreateAttr("URI", "#"+idToken)
	r.CreateAttr("ValueType", X509v3)
	return nil
}

// checkSignature verifies the ds:Signature of a wsse:Security header of
// envelope (its parts p): its references' digests, that they cover the
// Body (and the Timestamp, when there is one), and its value under a
// certificate of trusted.
func checkSignature(envelope *etree.Element, p securityParts, trusted []*x509.Certificate) *Fault {
	bad := func(reason string) *Fault { return &Fault{FailedCheck, "the signature is not valid: " + reason} }
	sig, bst, ts := p.signature, p.binaryToken, p.timestamp
	var body *etree.Element
	for _, c := range envelope.ChildElements() {
		if c.Tag == "Body" {
			body = c
		}
	}
	if sig == nil {
		return &Fault{InvalidSecurity, "the message is not signed"}
	}
	if bst == nil || body == nil {
		return bad("no BinarySecurityToken or no Body")
	}
	der, err := base64.StdEncoding.DecodeString(strings.TrimSpace(bst.Text()))
	if err != nil {
		return bad("the BinarySecurityToken is not base64")
	}
	var cert *x509.Certificate
	for _, c := range trusted {
		if bytes.Equal(c.Raw, der) {
			cert = c
		}
	}
	if cert == nil {
		return &Fault{"SecurityTokenUnavailable", "the signing certificate is not trusted"}
	}
	si := child(sig, "SignedInfo", NSDSig)
	if si == nil {
		return bad("no SignedInfo")
	}
	if alg(child(si, "CanonicalizationMethod", NSDSig)) != AlgExcC14N {
		return &Fault{"UnsupportedAlgorithm", "the canonicalization must be exclusive c14n"}
	}
	covered := map[*etree.Element]bool{}
	for _, ref := range si.ChildElements() {
		if ref.Tag != "Reference" || ref.NamespaceURI() != NSDSig {
			continue
		}
		id, ok := strings.CutPrefix(ref.SelectAttrValue("URI", ""), "#")
		target := byID(envelope, id)
		switch {
		case !ok || target == nil:
			return bad("a reference names no element of the message")
		case alg(child(ref, "DigestMethod", NSDSig)) != AlgSHA256:
			return &Fault{"UnsupportedAlgorithm", "the digest must be SHA-256"}
		}
		for _, tr := range childElements(child(ref, "Transforms", NSDSig)) {
			if alg(tr) != AlgExcC14N {
				return &Fault{"UnsupportedAlgorithm", "the only transform allowed is exclusive c14n"}
			}
		}
		want, err := base64.StdEncoding.DecodeString(strings.TrimSpace(textOf(child(ref, "DigestValue", NSDSig))))
		c, cerr := Canonical(target)
		sum := sha256.Sum256(c)
		if err != nil || cerr != nil || subtle.ConstantTimeCompare(want, sum[:]) != 1 {
			return bad("the digest of #" + id + " does not match")
		}
		covered[target] = true
	}
	if !covered[body] || ts != nil && !covered[ts] {
		return bad("it does not cover the Body and the Timestamp")
	}
	value, err := base64.StdEncoding.DecodeString(strings.TrimSpace(textOf(child(sig, "SignatureValue", NSDSig))))
	if err != nil {
		return bad("the SignatureValue is not base64")
	}
	c, err := Canonical(si)
	if err != nil {
		return bad("the SignedInfo cannot be canonicalized")
	}
	sum := sha256.Sum256(c)
	method := alg(child(si, "SignatureMethod", NSDSig))
	switch pub := cert.PublicKey.(type) {
	case *rsa.PublicKey:
		if method != AlgRSASHA256 || rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], value) != nil {
			return bad("the SignatureValue does not verify")
		}
	case *ecdsa.PublicKey:
		if method != AlgECDSASHA256 || len(value) != 64 ||
			!ecdsa.Verify(pub, sum[:], new(big.Int).SetBytes(value[:32]), new(big.Int).SetBytes(value[32:])) {
			return bad("the SignatureValue does not verify")
		}
	default:
		return &Fault{"UnsupportedAlgorithm", "the certificate's key is neither RSA nor ECDSA"}
	}
	return nil
}

// byID finds the one element of the document with the wsu:Id (or Id) id;
// nil when none or several have it (a signature wrapping attempt).
func byID(root *etree.Element, id string) *etree.Element {
	var found *etree.Element
	n := 0
	var walk func(e *etree.Element)
	walk = func(e *etree.Element) {
		for i := range e.Attr {
			if a := &e.Attr[i]; a.Key == "Id" && a.Value == id && (a.Space == "" || a.NamespaceURI() == NSUtility) {
				found = e
				n++
			}
		}
		for _, c := range e.ChildElements() {
			walk(c)
		}
	}
	walk(root)
	if n != 1 {
		return nil
	}
	return found
}

func child(el *etree.Element, tag, ns string) *etree.Element {
	for _, c := range childElements(el) {
		if c.Tag == tag && c.NamespaceURI() == ns {
			return c
		}
	}
	return nil
}

func childElements(el *etree.Element) []*etree.Element {
	if el == nil {
		return nil
	}
	return el.ChildElements()
}

func alg(el *etree.Element) string {
	if el == nil {
		return ""
	}
	return el.SelectAttrValue("Algorithm", "")
}

func textOf(el *etree.Element) string {
	if el == nil {
		return ""
	}
	return el.Text()
}
