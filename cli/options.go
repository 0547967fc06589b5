package cli

import (
	"context"
	"encoding/json"

	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// Options are the flags every command shares, named as kubectl names them.
type Options struct {
	Kubeconfig    string
	Context       string
	Namespace     string
	AllNamespaces bool
	// Output is "" (a table), "json" or "yaml"; OutputWide for commands that have a wide table.
	Output string

	// Client, when set, is used instead of one built from the kubeconfig (tests).
	Client client.Client
	// Now is the clock for ages and wait times; time.Now when nil.
	Now func() time.Time
	Out io.Writer

	namespace string // resolved by Complete
	wide      bool   // the command has a wide table (-o wide)
}

// OutputWide is -o wide: the table with more columns, as kubectl's.
const OutputWide = "wide"

// AddFlags registers the shared flags; -n and -A only for commands that read namespaced
// objects (queues and nodes are cluster-wide).
func (o *Options) AddFlags(fs *pflag.FlagSet, namespaced bool) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "Path to the kubeconfig file ($KUBECONFIG or ~/.kube/config when empty).")
	fs.StringVar(&o.Context, "context", "", "The kubeconfig context to use.")
	if namespaced {
		fs.StringVarP(&o.Namespace, "namespace", "n", "", "Namespace (the context's namespace when empty).")
		fs.BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "List across all namespaces.")
	}
	formats := "json or yaml"
	if o.wide {
		formats = "wide, json or yaml"
	}
	fs.StringVarP(&o.Output, "output", "o", "", "Output format: "+formats+" (a table when empty).")
}

// Complete validates the flags and builds the client from the kubeconfig.
func (o *Options) Complete() error {
	switch {
	case o.Output == "", o.Output == "json", o.Output == "yaml", o.Output == OutputWide && o.wide:
	case o.wide:
		return fmt.Errorf("unknown output format %q: use -o wide, -o json or -o yaml, or leave -o out for a table", o.Output)
	default:
		return fmt.Errorf("unknown output format %q: use -o json or -o yaml, or leave -o out for a table", o.Output)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.Kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: o.Context}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	o.namespace = o.Namespace
	if o.Client != nil {
		if o.namespace == "" {
			o.namespace = "default"
		}
		return nil
	}
	if o.namespace == "" {
		ns, _, err := cc.Namespace()
		if err != nil {
			return fmt.Errorf("reading the namespace from the kubeconfig: %w", err)
		}
		o.namespace = ns
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w (set --kubeconfig or $KUBECONFIG)", err)
	}
	cfg.UserAgent = "fairway-cli"
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return fmt.Errorf("connecting to the cluster: %w", err)
	}
	o.Client = c
	return nil
}

// Scheme knows the built-in types and fairway's API.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = fairwayv1.AddToScheme(s)
	return s
}

// ListNamespace is the namespace to list in: "" for all namespaces.
func (o *Options) ListNamespace() string {
	if o.AllNamespaces {
		return ""
	}
	return o.namespace
}

func (o *Options) list(ctx context.Context, l client.ObjectList, what string, opts ...client.ListOption) error {
	if err := o.Client.List(ctx, l, opts...); err != nil {
		return apiError(err, what)
	}
	return nil
}

// apiError turns the usual failures into what the user can do about them.
func apiError(err error, what string) error {
	if meta.IsNoMatchError(err) {
		return fmt.Errorf("listing %s: the cluster does not know fairway's API (%w); install fairway's CRDs with its Helm chart", what, err)
	}
	return fmt.Errorf("listing %s: %w", what, err)
}

// printStructured writes v as JSON or YAML; it reports false for table output.
func (o *Options) printStructured(v any) (bool, error) {
	switch o.Output {
	case "json":
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return true, err
		}
		_, err = fmt.Fprintf(o.Out, "%s\n", b)
		return true, err
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return true, err
		}
		_, err = o.Out.Write(b)
		return true, err
	}
	return false, nil
}

// errNotFound is wrapped by errors for objects the user named that do not exist.
var errNotFound = errors.New("not found")

func (o Options) clone() *Options { return &o }
