// Package release names the previous release of Crank and builds it from
// this repository's history, for the tests that run two releases side by
// side (a rolling upgrade, a rollback, an adapter built with the previous
// SDK). The previous release is the commit in the file "previous" beside
// this source: the main commit a release branched from, moved on when the
// next release lands (docs/operations.md, "Rolling upgrades"). Tests only.
package release

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
)

//go:embed previous
var previousFile string

var commitRE = regexp.MustCompile(`^[0-9a-f]{40}$`)

// Previous is the commit of the previous release.
func Previous() (string, error) {
	c := strings.TrimSpace(previousFile)
	if !commitRE.MatchString(c) {
		return "", fmt.Errorf("internal/release/previous: %q is not a 40-hex-digit commit", c)
	}
	return c, nil
}

// Source extracts the tree of commit in the repository at repo into dir
// (git archive: a scratch copy, nothing written to the repository).
func Source(repo, commit, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	archive := exec.Command("git", "-C", repo, "archive", "--format=tar", commit)
	untar := exec.Command("tar", "-x", "-C", dir)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return err
	}
	untar.Stdin = pipe
	var aerr, terr strings.Builder
	archive.Stderr, untar.Stderr = &aerr, &terr
	if err := untar.Start(); err != nil {
		return err
	}
	if err := archive.Run(); err != nil {
		_ = untar.Wait()
		return fmt.Errorf("git archive %s: %v: %s", commit, err, aerr.String())
	}
	if err := untar.Wait(); err != nil {
		return fmt.Errorf("extract %s: %v: %s", commit, err, terr.String())
	}
	return nil
}

// Build builds the main packages pkgs ("./cmd/crank") of the module in
// the directory module of the repository ("." for the root module,
// "plugins/sdk/examples/filetail" for the SDK's example adapter, built
// with the SDK of the same commit) at repo as of commit, and returns the
// directory that holds their executables. Builds are kept by commit and
// packages under $TMPDIR/crank-releases, so a commit is built once per
// machine; concurrent builds (parallel test binaries) wait for each other.
// The executables are built with -trimpath, so Go's build cache serves
// the packages unchanged since.
func Build(repo, commit, module string, pkgs ...string) (string, error) {
	if !commitRE.MatchString(commit) {
		return "", fmt.Errorf("release: %q is not a 40-hex-digit commit", commit)
	}
	root := filepath.Join(os.TempDir(), "crank-releases")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	name := commit + "-" + strings.NewReplacer("/", "_", ".", "").Replace(module+"+"+strings.Join(pkgs, "+"))
	out := filepath.Join(root, name)
	lock, err := os.OpenFile(out+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
	bin := filepath.Join(out, "bin")
	if _, err := os.Stat(filepath.Join(out, "done")); err == nil {
		return bin, nil
	}
	_ = os.RemoveAll(out)
	src, err := os.MkdirTemp(root, "src-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(src)
	if err := Source(repo, commit, src); err != nil {
		return "", err
	}
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return "", err
	}
	build := exec.Command("go", append([]string{"build", "-trimpath", "-o", bin + "/"}, pkgs...)...)
	build.Dir = filepath.Join(src, module)
	build.Env = append(os.Environ(), "GOWORK=off")
	if b, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("release: build %s at %s: %v\n%s", strings.Join(pkgs, " "), commit[:12], err, b)
	}
	if err := os.WriteFile(filepath.Join(out, "done"), nil, 0o644); err != nil {
		return "", err
	}
	return bin, nil
}

// ErrNoGit: the repository's history is not at hand (a source archive).
var ErrNoGit = errors.New("release: git or the repository's history is missing")

// Available reports whether commit can be read from the repository at
// repo (ErrNoGit when not).
func Available(repo, commit string) error {
	if _, err := exec.LookPath("git"); err != nil {
		return ErrNoGit
	}
	if err := exec.Command("git", "-C", repo, "cat-file", "-e", commit+"^{commit}").Run(); err != nil {
		return fmt.Errorf("%w: commit %s: %v", ErrNoGit, commit, err)
	}
	return nil
}
