package wsse

import (
	"fmt"

	"github.com/beevik/etree"
	dsig "github.com/russellhaering/goxmldsig"
	"github.com/russellhaering/goxmldsig/etreeutils"
)

// Canonical returns el's subtree in Exclusive XML Canonicalization 1.0
// (http://www.w3.org/2001/10/xml-exc-c14n#, without comments and without
// an InclusiveNamespaces prefix list), as XML-DSig digests and signs it:
// goxmldsig's canonicalizer, given a copy of el with the namespaces in
// scope where it stands (so a subtree canonicalizes the same in place
// and after a parse of its serialization; el is not changed).
func Canonical(el *etree.Element) ([]byte, error) {
	ctx, err := etreeutils.NSBuildParentContext(el)
	if err != nil {
		return nil, fmt.Errorf("cannot canonicalize %s: %v", el.Tag, err)
	}
	detached, err := etreeutils.NSDetatch(ctx, el)
	if err != nil {
		return nil, fmt.Errorf("cannot canonicalize %s: %v", el.Tag, err)
	}
	return dsig.MakeC14N10ExclusiveCanonicalizerWithPrefixList("").Canonicalize(detached)
}
