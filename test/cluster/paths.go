package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// modulePath is the root module's path; RepoRoot looks for the go.mod that declares it.
const modulePath = "github.com/fairway-sched/fairway"

// BinDirEnv names the environment variable that points at the directory of control-plane
// binaries. The Makefile exports it; without it the binaries are looked up in <repo root>/bin.
const BinDirEnv = "FAIRWAY_BIN"

// RepoRoot returns the root of the fairway repository: the nearest directory at or above the
// working directory whose go.mod declares the fairway module. Tests run in their package
// directory, so this works for `go test ./...` as well as for `go run ./test/demo`.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the repository root: %w", err)
	}
	for {
		if isFairwayModule(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("finding the repository root: no go.mod of " + modulePath + " above the working directory")
		}
		dir = parent
	}
}

func isFairwayModule(gomod string) bool {
	f, err := os.Open(gomod)
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if line := strings.TrimSpace(s.Text()); strings.HasPrefix(line, "module ") {
			return strings.TrimSpace(strings.TrimPrefix(line, "module ")) == modulePath
		}
	}
	return false
}

// BinDir returns the directory holding the control-plane binaries: $FAIRWAY_BIN when set,
// otherwise <repo root>/bin, where `make tools` puts them.
func BinDir() (string, error) {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		return filepath.Abs(dir)
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin"), nil
}

// binary returns the path of a binary in dir, with an error that says how to build it.
func binary(dir, name string) (string, error) {
	p := filepath.Join(dir, name)
	st, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("binary %s not found in %s (run `make tools` or hack/build-tools.sh %s): %w", name, dir, name, err)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%s is not an executable file", p)
	}
	return p, nil
}
