package chart

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/fairway-sched/fairway/test/cluster"
)

// KubeVersion is the Kubernetes version charts are rendered for: the local cluster's, read from
// hack/tools/kubernetes/go.mod (its one owner, which hack/build-tools.sh reads too). helm is
// given it explicitly so that a rendering never depends on how the binary was stamped.
func KubeVersion() (string, error) {
	root, err := cluster.RepoRoot()
	if err != nil {
		return "", err
	}
	path := filepath.Join(root, "hack", "tools", "kubernetes", "go.mod")
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`(?m)^require k8s\.io/kubernetes (v\d+\.\d+\.\d+)\s*$`).FindSubmatch(b)
	if m == nil {
		return "", fmt.Errorf("%s has no 'require k8s.io/kubernetes vX.Y.Z' line", path)
	}
	return string(m[1]), nil
}

// Release and Namespace are the release name and namespace tests and the demo install under.
const (
	Release   = "fairway"
	Namespace = "fairway-system"
)

// Dir returns the chart's directory, <repo root>/charts/fairway.
func Dir() (string, error) {
	root, err := cluster.RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "charts", "fairway"), nil
}

// ErrNoHelm is returned by Helm when bin/helm has not been built.
var ErrNoHelm = errors.New("bin/helm is missing: run `make chart-test` or `hack/build-tools.sh helm`")

// Helm returns the path of the pinned helm binary in the cluster's bin directory.
func Helm() (string, error) {
	bin, err := cluster.BinDir()
	if err != nil {
		return "", err
	}
	p := filepath.Join(bin, "helm")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%w (%s)", ErrNoHelm, p)
	}
	return p, nil
}

// Options are the values a rendering uses, as helm's flags take them.
type Options struct {
	// Set and SetJSON are --set and --set-json arguments (key=value).
	Set, SetJSON []string
	// ValuesYAML are values files' contents, passed with -f.
	ValuesYAML []string
	// Namespace is the release namespace; Namespace when empty.
	Namespace string
}

// Local are the options of a chart whose webhook runs as a local process (test/fairwayproc), which
// the API server calls at https://localhost:<port> rather than through the Service: the admission
// policy on the webhook's configuration must allow that URL.
func Local() Options {
	return Options{Set: []string{"admissionPolicies.webhookURLPrefix=https://localhost:"}}
}

// Rendering is the output of helm template.
type Rendering struct {
	// YAML is helm's output as it is, comments included.
	YAML string
	// Objects are its documents, in order.
	Objects []*unstructured.Unstructured
}

// Template runs `helm template` on the chart, CRDs included, and decodes its output. A refusal
// (the values schema, a template's fail) comes back as an error carrying helm's message.
func Template(ctx context.Context, o Options) (*Rendering, error) {
	if o.Namespace == "" {
		o.Namespace = Namespace
	}
	kube, err := KubeVersion()
	if err != nil {
		return nil, err
	}
	args := []string{"template", Release, "", "--namespace", o.Namespace, "--kube-version", kube, "--include-crds"}
	extra, cleanup, err := valueArgs(o)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	out, err := helm(ctx, append(args, extra...)...)
	if err != nil {
		return nil, err
	}
	objs, err := Decode(out)
	if err != nil {
		return nil, err
	}
	return &Rendering{YAML: out, Objects: objs}, nil
}

// Lint runs `helm lint --strict` on the chart with the values of o and returns its output.
func Lint(ctx context.Context, o Options) (string, error) {
	kube, err := KubeVersion()
	if err != nil {
		return "", err
	}
	extra, cleanup, err := valueArgs(o)
	if err != nil {
		return "", err
	}
	defer cleanup()
	return helm(ctx, append([]string{"lint", "", "--strict", "--kube-version", kube}, extra...)...)
}

// valueArgs turns o into helm flags; values files go to a temporary directory that cleanup
// removes.
func valueArgs(o Options) (args []string, cleanup func(), err error) {
	cleanup = func() {}
	for _, s := range o.Set {
		args = append(args, "--set", s)
	}
	for _, s := range o.SetJSON {
		args = append(args, "--set-json", s)
	}
	if len(o.ValuesYAML) > 0 {
		dir, err := os.MkdirTemp("", "fairway-values-")
		if err != nil {
			return nil, cleanup, err
		}
		cleanup = func() { os.RemoveAll(dir) }
		for i, v := range o.ValuesYAML {
			f := filepath.Join(dir, fmt.Sprintf("values-%d.yaml", i))
			if err := os.WriteFile(f, []byte(v), 0o644); err != nil {
				cleanup()
				return nil, func() {}, err
			}
			args = append(args, "-f", f)
		}
	}
	return args, cleanup, nil
}

// helm runs the pinned helm; an empty argument is replaced by the chart's directory.
func helm(ctx context.Context, args ...string) (string, error) {
	bin, err := Helm()
	if err != nil {
		return "", err
	}
	dir, err := Dir()
	if err != nil {
		return "", err
	}
	for i, a := range args {
		if a == "" {
			args[i] = dir
		}
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String() + "\n" + stdout.String())
		return "", fmt.Errorf("helm %s: %w\n%s", args[0], err, msg)
	}
	return stdout.String(), nil
}

// Decode splits a multi-document YAML stream into objects, skipping empty documents. Numbers
// decode as int64 where they are integers, as the API machinery decodes them.
func Decode(manifests string) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifests)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading helm's output: %w", err)
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("decoding helm's output: %w", err)
		}
		if s := strings.TrimSpace(string(js)); s == "null" || s == "{}" {
			continue
		}
		o := &unstructured.Unstructured{}
		if err := o.UnmarshalJSON(js); err != nil {
			return nil, fmt.Errorf("decoding helm's output: %w\n%s", err, doc)
		}
		objs = append(objs, o)
	}
}

// Find returns the rendered object of a kind and name, nil if there is none.
func (r *Rendering) Find(kind, name string) *unstructured.Unstructured {
	for _, o := range r.Objects {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// Kinds counts the rendered objects by kind.
func (r *Rendering) Kinds() map[string]int {
	out := map[string]int{}
	for _, o := range r.Objects {
		out[o.GetKind()]++
	}
	return out
}
