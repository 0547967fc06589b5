package main

import (
	"os"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fairway-sched/fairway/console"
)

// newConsoleCommand is `fairway console`, the read-only web console.
func newConsoleCommand() *cobra.Command {
	c := console.Config{Listen: "127.0.0.1:8080", Auth: console.AuthLocal, TokenReviewTTL: 10 * time.Second,
		AccessReviewTTL: 30 * time.Second, HistoryInterval: 30 * time.Second}
	if os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		// In a pod the console serves others: never as the pod's own identity.
		c.Listen, c.Auth = ":8080", console.AuthToken
	}
	var kubeconfig string
	zapOpts := zap.Options{StacktraceLevel: zapcore.PanicLevel}
	cmd := &cobra.Command{
		Use:   "console",
		Short: "Serve the read-only web console: overview, queues with usage history, workloads, GPU grid, why",
		Long: `Serve fairway's web console: the cluster's GPUs by type, the queue tree against guarantees with
usage history, workloads grouped as users know them (a KFP run, an Argo Workflow, a RayCluster, a
notebook, a PyTorchJob, an inference Deployment) with why they wait, every node's GPU grid, and
the explanation of ` + "`fairway why`" + ` for any pod, gang, workload or queue. Pages update live.

--auth=local (the default outside a cluster) serves your kubeconfig's view on a loopback address:
  fairway console --kubeconfig ~/.kube/config   # then open http://127.0.0.1:8080
--auth=token (the default in a pod) asks each user for a bearer token, checked with TokenReview;
--auth=proxy believes the user a fronting OAuth2 proxy asserts, from --trusted-proxies only.
Each user sees the namespaces they may list pods in (SubjectAccessReview). See docs/console.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := c.Validate(); err != nil {
				return err
			}
			log := setupLogging(&zapOpts)
			cfg, err := restConfig(kubeconfig, "fairway-console")
			if err != nil {
				return err
			}
			return console.Run(ctrl.SetupSignalHandler(), cfg, c, log.WithName("console"))
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "Kubeconfig file; in-cluster configuration when empty (and $KUBECONFIG unset).")
	f.StringVar(&c.Listen, "listen", c.Listen, "Address to serve on.")
	f.StringVar(&c.Auth, "auth", c.Auth, "Who the user is: local (the kubeconfig's user, loopback only), token (bearer token or login page, TokenReview) or proxy (a trusted proxy's headers).")
	f.StringSliceVar(&c.TrustedProxies, "trusted-proxies", nil, "With --auth=proxy: addresses or CIDRs of the proxy; user headers from anywhere else are refused.")
	f.StringVar(&c.ProxyUserHeader, "proxy-user-header", "X-Forwarded-User", "With --auth=proxy: the header that names the user.")
	f.StringVar(&c.ProxyGroupsHeader, "proxy-groups-header", "X-Forwarded-Groups", "With --auth=proxy: the header that lists the user's groups (comma separated or repeated).")
	f.DurationVar(&c.TokenReviewTTL, "token-review-ttl", c.TokenReviewTTL, "How long a TokenReview's answer is believed: a revoked token stops working within it.")
	f.DurationVar(&c.AccessReviewTTL, "access-review-ttl", c.AccessReviewTTL, "How long a SubjectAccessReview's answer is believed: a changed RoleBinding shows within it.")
	f.StringVar(&c.TLSCertFile, "tls-cert-file", "", "Serve HTTPS with this certificate (and --tls-key-file).")
	f.StringVar(&c.TLSKeyFile, "tls-key-file", "", "The key of --tls-cert-file.")
	f.BoolVar(&c.SecureCookie, "secure-cookie", false, "Mark the login cookie Secure (implied by --tls-cert-file; set it behind a proxy that serves HTTPS).")
	f.StringVar(&c.HistoryFile, "history-file", "", "Keep the recorded usage history in this file across restarts (a volume); in memory when empty.")
	f.StringVar(&c.PrometheusURL, "prometheus-url", "", "Read the usage history from this Prometheus (which scrapes the scheduler) instead of recording it.")
	f.DurationVar(&c.HistoryInterval, "history-interval", c.HistoryInterval, "How often the queues' allocations are sampled into the recorded history.")
	bindZap(cmd, &zapOpts)
	cmd.GroupID = cliGroup
	return cmd
}
