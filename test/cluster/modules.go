package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// ModuleDir returns the directory, in the Go module cache, of a module at the version that the
// tools module hack/tools/<toolsModule> pins, such as the Argo module for its CRD manifests. It
// asks `go list -m` in that tools module, downloading the module if `make tools` has not.
func ModuleDir(ctx context.Context, toolsModule, modulePath string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "hack", "tools", toolsModule)
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("locating module %s: the go command is needed: %w", modulePath, err)
	}
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, goBin, args...)
		cmd.Dir = dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("go %s in %s: %w: %s", strings.Join(args, " "), dir, err, stderr.String())
		}
		return strings.TrimSpace(string(out)), nil
	}
	modDir, err := run("list", "-m", "-f", "{{.Dir}}", modulePath)
	if err != nil {
		return "", err
	}
	if modDir == "" { // listed in go.mod but not downloaded yet
		if modDir, err = run("mod", "download", "-json", modulePath); err != nil {
			return "", err
		}
		if modDir, err = run("list", "-m", "-f", "{{.Dir}}", modulePath); err != nil {
			return "", err
		}
	}
	if modDir == "" {
		return "", fmt.Errorf("module %s has no directory after download (tools module %s)", modulePath, dir)
	}
	return modDir, nil
}
