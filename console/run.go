package console

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/cli"
	"github.com/fairway-sched/fairway/console/auth"
	"github.com/fairway-sched/fairway/console/history"
)

// Authentication modes of `fairway console --auth`.
const (
	AuthLocal = "local"
	AuthToken = "token"
	AuthProxy = "proxy"
)

// Config is `fairway console`'s flags.
type Config struct {
	// Listen is the address to serve on.
	Listen string
	// Auth is local, token or proxy.
	Auth string
	// TrustedProxies, ProxyUserHeader and ProxyGroupsHeader configure proxy mode.
	TrustedProxies                     []string
	ProxyUserHeader, ProxyGroupsHeader string
	// TokenReviewTTL and AccessReviewTTL are how long identity and access answers are cached.
	TokenReviewTTL, AccessReviewTTL time.Duration
	// TLSCertFile and TLSKeyFile serve HTTPS; SecureCookie marks the login cookie Secure
	// (always with TLS; set it behind a proxy that terminates HTTPS).
	TLSCertFile, TLSKeyFile string
	SecureCookie            bool
	// HistoryFile keeps the recorded usage history across restarts; PrometheusURL reads the
	// history from Prometheus instead. HistoryInterval is how often allocations are sampled.
	HistoryFile     string
	PrometheusURL   string
	HistoryInterval time.Duration
	// Ready, when set, is called with the address the console serves on once it does.
	Ready func(addr string)
}

// Validate checks the flags, naming the one that is wrong.
func (c *Config) Validate() error {
	switch c.Auth {
	case AuthLocal:
		host, _, err := net.SplitHostPort(c.Listen)
		if err != nil {
			return fmt.Errorf("--listen %q: %w", c.Listen, err)
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return fmt.Errorf("--listen %q with --auth=local: local mode shows the kubeconfig's view to whoever connects, so it serves on a loopback address only (127.0.0.1:PORT); use --auth=token or --auth=proxy to serve others", c.Listen)
		}
	case AuthToken:
	case AuthProxy:
		if len(c.TrustedProxies) == 0 {
			return errors.New("--auth=proxy needs --trusted-proxies: the addresses (CIDRs) of the proxy whose user headers are believed")
		}
		if _, err := auth.ParsePrefixes(c.TrustedProxies); err != nil {
			return fmt.Errorf("--trusted-proxies: %w", err)
		}
	default:
		return fmt.Errorf("--auth=%q: use local (your kubeconfig's view, on loopback), token (a bearer token or the login page, checked with TokenReview) or proxy (a trusted proxy's user headers)", c.Auth)
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return errors.New("--tls-cert-file and --tls-key-file go together")
	}
	if c.HistoryFile != "" && c.PrometheusURL != "" {
		return errors.New("--history-file and --prometheus-url exclude each other: the history comes from one of them")
	}
	if c.HistoryInterval <= 0 {
		return fmt.Errorf("--history-interval %s: must be positive", c.HistoryInterval)
	}
	return nil
}

// Run serves the console until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, c Config, log logr.Logger) error {
	if err := c.Validate(); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("connecting to the cluster: %w", err)
	}
	store, err := NewCacheStore(cfg, cli.Scheme())
	if err != nil {
		return err
	}
	o := Options{Store: store, Log: log}
	switch c.Auth {
	case AuthLocal:
		name := "your kubeconfig's user"
		if r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{}); err == nil {
			name = r.Status.UserInfo.Username
		}
		o.Authenticator = &auth.Fixed{User: auth.User{Name: name}}
		o.Scoper = &auth.Authorizer{Client: cs, TTL: c.AccessReviewTTL, Self: true}
	case AuthToken:
		tr := &auth.TokenReview{Client: cs, TTL: c.TokenReviewTTL}
		o.Authenticator, o.Reviewer, o.Login = tr, tr, true
		o.Scoper = &auth.Authorizer{Client: cs, TTL: c.AccessReviewTTL}
	case AuthProxy:
		trusted, _ := auth.ParsePrefixes(c.TrustedProxies)
		o.Authenticator = &auth.Proxy{UserHeader: c.ProxyUserHeader, GroupsHeader: c.ProxyGroupsHeader, Trusted: trusted}
		o.Scoper = &auth.Authorizer{Client: cs, TTL: c.AccessReviewTTL}
	}
	o.SecureCookie = c.SecureCookie || c.TLSCertFile != ""
	var rec *history.Recorder
	switch {
	case c.PrometheusURL != "":
		p, err := history.NewPrometheus(c.PrometheusURL, nil)
		if err != nil {
			return err
		}
		o.History, o.HistorySource = p, "Prometheus (fairway_queue_allocated)"
	default:
		if rec, err = history.NewRecorder(c.HistoryFile); err != nil {
			return err
		}
		o.History, o.HistorySource = rec, "the scheduler's queue allocations, recorded by this console since it started"
		if c.HistoryFile != "" {
			o.HistorySource = "the scheduler's queue allocations, recorded by the console in " + c.HistoryFile
		}
	}
	srv, err := New(o)
	if err != nil {
		return err
	}
	log.Info("Filling the console's cache")
	if err := store.Start(ctx); err != nil {
		return err
	}
	if rec != nil {
		go record(ctx, store, rec, c.HistoryInterval, log)
	}
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", c.Listen, err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 1)
	go func() {
		if c.TLSCertFile != "" {
			errc <- hs.ServeTLS(ln, c.TLSCertFile, c.TLSKeyFile)
		} else {
			errc <- hs.Serve(ln)
		}
	}()
	scheme := "http"
	if c.TLSCertFile != "" {
		scheme = "https"
	}
	log.Info("Serving the console", "url", scheme+"://"+ln.Addr().String(), "auth", c.Auth)
	if c.Ready != nil {
		c.Ready(ln.Addr().String())
	}
	select {
	case err := <-errc:
		return fmt.Errorf("serving the console: %w", err)
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Live streams never end by themselves: close them rather than wait.
	_ = hs.Shutdown(shut)
	_ = hs.Close()
	if rec != nil {
		if err := rec.Save(); err != nil {
			log.Error(err, "Saving the usage history")
		}
	}
	return nil
}

// record samples the queues' allocations into rec every interval, and saves rec every 5
// minutes.
func record(ctx context.Context, store *CacheStore, rec *history.Recorder, interval time.Duration, log logr.Logger) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	lastSave := time.Now()
	for {
		var queues fairwayv1.QueueList
		if err := store.cache.List(ctx, &queues, client.UnsafeDisableDeepCopy); err == nil {
			alloc := make(map[string]corev1.ResourceList, len(queues.Items))
			for i := range queues.Items {
				alloc[queues.Items[i].Name] = queues.Items[i].Status.Allocated
			}
			rec.Observe(store.now(), alloc)
		}
		if time.Since(lastSave) > 5*time.Minute {
			if err := rec.Save(); err != nil {
				log.Error(err, "Saving the usage history")
			}
			lastSave = time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
