package story

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"path"
	"text/template"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fairway-sched/fairway/test/chart"
)

// manifests are the YAML files the acts apply, as a user would write them.
//
//go:embed manifests/*.yaml
var manifests embed.FS

// The manifests, by act.
const (
	queuesManifest    = "0-queues.yaml"
	notebookManifest  = "1-notebook.yaml"
	sweepManifest     = "1-sweep.yaml"
	teamAManifest     = "2-team-a.yaml"
	nightManifest     = "3-night.yaml"
	inferenceManifest = "4-inference.yaml"
)

// manifestPath is a manifest's path in the repository, for captions.
func manifestPath(name string) string { return path.Join("test/demo/story/manifests", name) }

// objects reads a manifest; data, when not nil, fills its text/template placeholders.
func objects(name string, data any) ([]*unstructured.Unstructured, error) {
	b, err := manifests.ReadFile(path.Join("manifests", name))
	if err != nil {
		return nil, err
	}
	if data != nil {
		t, err := template.New(name).Option("missingkey=error").Parse(string(b))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		var out bytes.Buffer
		if err := t.Execute(&out, data); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		b = out.Bytes()
	}
	objs, err := chart.Decode(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return objs, nil
}

// apply server-side applies a manifest, as `kubectl apply --server-side` would.
func (e *Env) apply(ctx context.Context, name string, data any) error {
	objs, err := objects(name, data)
	if err != nil {
		return err
	}
	if err := e.C.Apply(ctx, objs...); err != nil {
		return fmt.Errorf("applying %s: %w", manifestPath(name), err)
	}
	return nil
}
