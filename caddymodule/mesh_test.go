package caddymodule

import (
	"os"
	"regexp"
	"testing"

	"github.com/crankmcp/crank/host/mesh"
)

// TestMeshFieldsDocumented holds the README's mesh block to mesh.Config:
// every field is there.
func TestMeshFieldsDocumented(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile(`(?s)\n( *)mesh \{\n(.*?)\n( *)\}\n`).FindSubmatch(readme)
	if block == nil {
		t.Fatal("README.md has no mesh block")
	}
	for _, f := range mesh.Fields() {
		if !regexp.MustCompile(`(?m)^\s+` + f.Name + `\s`).Match(block[2]) {
			t.Errorf("README.md's mesh block does not show %s (%s)", f.Name, f.Doc)
		}
	}
}
