package mutatingwebhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/fairway-sched/fairway/adapters/registry"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/mutating-webhook/certs"
)

// caBundleSource is what the configuration reconciler reads its CA bundle from (package certs).
type caBundleSource = certs.BundleSource

// Config is everything Run needs.
type Config struct {
	// Options say how pods are rewritten.
	Options Options
	// Configuration describes the MutatingWebhookConfiguration; ManageConfiguration makes the
	// webhook create it and keep it up to date (served namespaces, CA bundle).
	Configuration       ConfigurationOptions
	ManageConfiguration bool
	// Certs configure the serving certificate.
	Certs certs.Options

	// Host and Port the webhook server listens on (Host empty: every address).
	Host string
	Port int
	// EnableHTTP2 serves HTTP/2 as well; off by default, as in Kubebuilder projects, against
	// HTTP/2 stream-reset floods (CVE-2023-44487). The API server then uses HTTP/1.1.
	EnableHTTP2 bool
	// MetricsAddr, ProbeAddr and PprofAddr are the metrics, health-probe and pprof listeners;
	// "0" or empty turns one off.
	MetricsAddr, ProbeAddr, PprofAddr string
	// ObjectTimeout bounds the wait for a framework object in the cache.
	ObjectTimeout time.Duration
}

// NewScheme returns the scheme the webhook decodes and caches with: the built-in types and
// fairway's API.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := fairwayv1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// Run serves the webhook until ctx ends. It starts informers on Queues, PriorityClasses, node
// metadata and the framework kinds, sets up the certificate, keeps the webhook configuration up
// to date when asked, and starts serving once the caches are synced and the certificate is in
// place, so that no request is answered from an empty cache.
func Run(ctx context.Context, restConfig *rest.Config, cfg Config, log logr.Logger) error {
	ctrllog.SetLogger(log)
	scheme, err := NewScheme()
	if err != nil {
		return fmt.Errorf("building the scheme: %w", err)
	}
	mgr, err := manager.New(restConfig, manager.Options{
		Scheme:                 scheme,
		Logger:                 log,
		Metrics:                metricsserver.Options{BindAddress: cfg.MetricsAddr},
		HealthProbeBindAddress: cfg.ProbeAddr,
		PprofBindAddress:       cfg.PprofAddr,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	direct, err := client.New(restConfig, client.Options{Scheme: scheme, Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return fmt.Errorf("creating a client: %w", err)
	}

	// Informers the defaulter reads.
	if err := indexQueues(ctx, mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("indexing queues by namespace: %w", err)
	}
	gpus := newGPUMemoryIndex()
	nodes := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}}
	nodeInformer, err := mgr.GetCache().GetInformer(ctx, nodes, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("watching nodes: %w", err)
	}
	if _, err := nodeInformer.AddEventHandler(gpus.handler()); err != nil {
		return fmt.Errorf("watching nodes: %w", err)
	}
	// Namespace labels, for the queues that select namespaces (spec.namespaceSelector).
	if _, err := mgr.GetCache().GetInformer(ctx, namespaceMeta(), cache.BlockUntilSynced(false)); err != nil {
		return fmt.Errorf("watching namespaces: %w", err)
	}
	if _, err := mgr.GetCache().GetInformer(ctx, &schedulingv1.PriorityClass{}, cache.BlockUntilSynced(false)); err != nil {
		return fmt.Errorf("watching priority classes: %w", err)
	}
	adapters := registry.All()
	if err := mgr.Add(&warmInformers{cache: mgr.GetCache(), mapper: mgr.GetRESTMapper(), kinds: append(registry.WatchedKinds(adapters), draKinds...), log: log}); err != nil {
		return err
	}
	state := &cachedState{reader: mgr.GetCache(), gpus: gpus}
	objects := newCachedObjects(mgr.GetCache(), mgr.GetAPIReader(), mgr.GetRESTMapper(), cfg.ObjectTimeout)
	defaulter := NewPodDefaulter(adapters, state, objects, cfg.Options)

	// Certificates and the webhook configuration.
	wake := make(chan event.GenericEvent, 1)
	reconciler := &configurationReconciler{client: mgr.GetClient(), opts: cfg.Configuration, manage: cfg.ManageConfiguration,
		log: log.WithName("configuration")}
	switch cfg.Certs.Mode {
	case certs.Rotate:
		if len(cfg.Certs.DNSNames) == 0 {
			return errors.New("the certificate needs at least one DNS name")
		}
		key := types.NamespacedName{Namespace: cfg.Certs.SecretNamespace, Name: cfg.Certs.SecretName}
		rotator := certs.NewRotator(direct, key, cfg.Certs.DNSNames, log.WithName("certificates"))
		events := make(chan struct{}, 1)
		go forward(ctx, events, wake, cfg.Configuration.Name)
		if err := mgr.Add(certs.NewManager(rotator, cfg.Certs.Dir, cfg.Certs.WriteFiles, events, log.WithName("certificates"))); err != nil {
			return err
		}
		reconciler.bundle = certs.SecretBundle{Client: direct, Key: key}
	case certs.Files:
		reconciler.bundle = certs.FileBundle{Dir: cfg.Certs.Dir}
	default:
		return fmt.Errorf("unknown certificate mode %q (want %q or %q)", cfg.Certs.Mode, certs.Rotate, certs.Files)
	}
	if err := setupConfigurationReconciler(mgr, reconciler, wake); err != nil {
		return err
	}
	ready := func() bool {
		_, err := os.Stat(filepath.Join(cfg.Certs.Dir, certs.CertFile))
		return err == nil && reconciler.injected.Load()
	}

	// The server.
	var tlsOpts []func(*tls.Config)
	if !cfg.EnableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	srv := webhook.NewServer(webhook.Options{Host: cfg.Host, Port: cfg.Port, CertDir: cfg.Certs.Dir, TLSOpts: tlsOpts})
	srv.Register(MutatePath, NewHandler(defaulter).HTTPHandler(log.WithName("admission")))
	srv.Register(GuardPath, NewGuardHandler(state, cfg.Options).HTTPHandler(log.WithName("guard")))
	srv.Register(BypassPath, NewBypassHandler(cfg.Options, objects).HTTPHandler(log.WithName("bypass")))
	srv.Register(ImmutablePath, ImmutableHandler{}.HTTPHandler(log.WithName("immutable")))
	srv.Register(WorkflowPath, NewWorkflowHandler(state, state, cfg.Configuration.ServiceNamespace).HTTPHandler(log.WithName("workflows")))
	gated := &gatedServer{server: srv, ready: ready, cache: mgr.GetCache(), log: log}
	if err := mgr.Add(gated); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("webhook", gated.readyz); err != nil {
		return err
	}
	log.Info("Starting the fairway webhook", "port", cfg.Port, "configuration", cfg.Configuration.Name, "certs", cfg.Certs.Mode)
	return mgr.Start(ctx)
}

// gatedServer starts the webhook server once the certificate is in the certificate directory,
// the webhook configuration carries its CA, and the caches have synced. Until then the API server cannot reach it (connection refused), which with
// failurePolicy Fail refuses pods in served namespaces rather than admitting them unchanged.
type gatedServer struct {
	server  webhook.Server
	ready   func() bool
	cache   cache.Cache
	log     logr.Logger
	started atomic.Bool
}

func (g *gatedServer) Start(ctx context.Context) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for !g.ready() {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
	if !g.cache.WaitForCacheSync(ctx) {
		return errors.New("the cache did not sync")
	}
	g.log.Info("Certificate ready and caches synced; serving admission requests")
	g.started.Store(true)
	return g.server.Start(ctx)
}

// NeedLeaderElection: every replica serves.
func (g *gatedServer) NeedLeaderElection() bool { return false }

func (g *gatedServer) readyz(req *http.Request) error {
	if !g.started.Load() {
		return errors.New("waiting for the certificate and the caches")
	}
	return g.server.StartedChecker()(req)
}

// forward turns the certificate manager's "CA bundle changed" signals into reconcile events.
func forward(ctx context.Context, in <-chan struct{}, out chan<- event.GenericEvent, name string) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-in:
			obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name}}
			select {
			case out <- event.GenericEvent{Object: obj}:
			case <-ctx.Done():
				return
			}
		}
	}
}
