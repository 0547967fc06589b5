// Command generate writes fairway's Grafana dashboards as JSON, one file per dashboard, into
// each -out directory (dashboards/json by default) and removes JSON files there that no
// dashboard produces any more. `make generate` runs it; a test of package dashboards fails
// when the committed files differ from what it writes.
//
//	go run ./dashboards/cmd/generate [-out DIR]...
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/fairway-sched/fairway/dashboards"
)

type dirs []string

func (d *dirs) String() string     { return strings.Join(*d, ",") }
func (d *dirs) Set(v string) error { *d = append(*d, v); return nil }

func main() {
	var out dirs
	flag.Var(&out, "out", "Directory to write the dashboards' JSON into (repeatable); dashboards/json when not given.")
	flag.Parse()
	if len(out) == 0 {
		out = dirs{"dashboards/json"}
	}
	if err := generate(out); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func generate(out []string) error {
	files, err := dashboards.Render()
	if err != nil {
		return err
	}
	for _, dir := range out {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		old, err := filepath.Glob(filepath.Join(dir, "*.json"))
		if err != nil {
			return err
		}
		for _, f := range old {
			if _, ok := files[filepath.Base(f)]; !ok {
				if err := os.Remove(f); err != nil {
					return err
				}
			}
		}
		names := make([]string, 0, len(files))
		for name := range files {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			if err := os.WriteFile(filepath.Join(dir, name), files[name], 0o644); err != nil {
				return err
			}
		}
		fmt.Printf("wrote %d dashboards to %s\n", len(names), dir)
	}
	return nil
}
