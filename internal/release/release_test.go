package release_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/crankmcp/crank/internal/missing"
	"github.com/crankmcp/crank/internal/release"
)

// The previous release is a commit of this repository's history, an
// ancestor of what is being tested.
func TestPreviousIsAnAncestor(t *testing.T) {
	t.Parallel()
	prev, err := release.Previous()
	if err != nil {
		t.Fatal(err)
	}
	_, file, _, _ := runtime.Caller(0)
	repo := filepath.Join(filepath.Dir(file), "..", "..")
	if err := release.Available(repo, prev); err != nil {
		missing.Tool(t, "git with the repository's history", err.Error())
		return
	}
	if out, err := exec.Command("git", "-C", repo, "merge-base", "--is-ancestor", prev, "HEAD").CombinedOutput(); err != nil {
		t.Fatalf("the previous release %s is not an ancestor of HEAD: %v %s", prev, err, out)
	}
}
