package main

import (
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2/textlogger"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	mutatingwebhook "github.com/fairway-sched/fairway/mutating-webhook"
	"github.com/fairway-sched/fairway/mutating-webhook/certs"
)

// webhookFlags are the command-line settings of `fairway webhook`.
type webhookFlags struct {
	kubeconfig          string
	namespace           string
	host                string
	port                int
	certDir             string
	certMode            string
	certSecret          string
	writeCertFiles      bool
	serviceName         string
	servicePort         int32
	webhookURL          string
	configurationName   string
	manageConfiguration bool
	timeoutSeconds      int32
	takeOverSchedulers  []string
	mpsVolumes          bool
	enableHTTP2         bool
	metricsAddr         string
	probeAddr           string
	pprofAddr           string
	objectTimeout       time.Duration
	verbosity           int
	admissionKeyFile    string
}

func newWebhookCommand() *cobra.Command {
	f := &webhookFlags{}
	cmd := &cobra.Command{
		Use:   "webhook",
		Short: "Run the admission webhook that hands framework pods to fairway",
		Long: `Run fairway's mutating admission webhook. It recognises the pods of Kubeflow Pipelines,
Argo Workflows, Airflow, MLflow, JupyterHub, Kubeflow Notebooks, KubeRay, PyTorchJob, MPIJob,
TFJob, XGBoostJob, PaddleJob, JAXJob, JobSet, LeaderWorkerSet, KServe, Knative and the Triton and
vLLM model servers, gangs users name themselves, and plain pods, in namespaces served by a Queue,
and rewrites them for fairway: scheduler name, queue, gang, priority class and GPU share. It keeps
its own MutatingWebhookConfiguration and serving certificate up to date.

Run it in the cluster behind a Service (the Helm chart does), or outside the cluster against a
local API server with --webhook-url=https://localhost:<port> --write-cert-files.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runWebhook(cmd, f)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "Path to a kubeconfig; in-cluster configuration or $KUBECONFIG when empty.")
	fs.StringVar(&f.namespace, "namespace", envOr("POD_NAMESPACE", "fairway-system"), "fairway's namespace: holds the certificate Secret and the Service; its pods are never touched.")
	fs.StringVar(&f.host, "host", "", "Address to serve on; every address when empty.")
	fs.IntVar(&f.port, "port", 9443, "Port to serve admission requests on.")
	fs.StringVar(&f.certDir, "cert-dir", "/tmp/k8s-webhook-server/serving-certs", "Directory with tls.crt and tls.key (the mounted certificate Secret).")
	fs.StringVar(&f.certMode, "cert-mode", string(certs.Rotate), `"rotate": make, renew and inject a self-signed CA and certificate (ECDSA P-256), kept in --cert-secret; "files": use tls.crt/tls.key/ca.crt written into --cert-dir by cert-manager.`)
	fs.StringVar(&f.certSecret, "cert-secret", "fairway-webhook-cert", "Secret that holds the rotated certificate (cert-mode rotate).")
	fs.BoolVar(&f.writeCertFiles, "write-cert-files", false, "Copy the certificate Secret into --cert-dir (for running outside a pod, where no kubelet mounts it).")
	fs.StringVar(&f.serviceName, "service-name", "fairway-webhook", "Service the API server calls the webhook through.")
	fs.Int32Var(&f.servicePort, "service-port", 443, "Port of that Service.")
	fs.StringVar(&f.webhookURL, "webhook-url", "", "Base URL the API server calls instead of the Service, e.g. https://localhost:9443 (local clusters).")
	fs.StringVar(&f.configurationName, "configuration-name", "fairway-webhook", "Name of the MutatingWebhookConfiguration.")
	fs.BoolVar(&f.manageConfiguration, "manage-configuration", true, "Create the MutatingWebhookConfiguration and keep its served namespaces up to date from the Queues.")
	fs.Int32Var(&f.timeoutSeconds, "timeout-seconds", 5, "timeoutSeconds of the webhooks: how long the API server waits before applying the failure policy.")
	fs.StringSliceVar(&f.takeOverSchedulers, "take-over-schedulers", mutatingwebhook.DefaultTakeOverSchedulers, "Scheduler names replaced by fairway besides an empty one; '*' prefix matches a suffix. Pods naming any other scheduler are left alone.")
	fs.BoolVar(&f.mpsVolumes, "mps-volumes", false, "When the GPU nodes' gpu-agents run NVIDIA MPS: give the GPU container of each fractional pod its own MPS pipe directory (at "+mutatingwebhook.DefaultMPSPipeDirectory+") and /dev/shm, as CSI ephemeral volumes the agent serves ("+fairwayv1.MPSDriverName+").")
	fs.BoolVar(&f.enableHTTP2, "enable-http2", false, "Serve HTTP/2 too.")
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", ":8080", `Metrics listener; "0" turns it off.`)
	fs.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", `Health probe listener (/healthz, /readyz); "0" turns it off.`)
	fs.StringVar(&f.pprofAddr, "pprof-bind-address", "0", `pprof listener for profiling (e.g. 127.0.0.1:6060); "0" turns it off.`)
	fs.DurationVar(&f.objectTimeout, "object-timeout", 2*time.Second, "Longest wait for a framework object (a RayCluster) before admitting its pod without a gang size.")
	fs.IntVarP(&f.verbosity, "v", "v", 0, "Log verbosity (2: one line per admitted pod).")
	fs.StringVar(&f.admissionKeyFile, "admission-key-file", "", "File with the key (at least 32 bytes) that seals every pod the webhook admits (annotation "+fairwayv1.AdmittedAnnotation+"); the scheduler, given the same key, places only sealed pods. The chart mounts Secret fairway-admission-key.")
	cmd.AddCommand(newWebhookUninstallCommand())
	return cmd
}

func runWebhook(cmd *cobra.Command, f *webhookFlags) error {
	if os.Getenv("GOGC") == "" {
		// Admission allocates ~60 KB per pod over a heap of a few tens of MB, so at the default
		// GOGC=100 the collector runs several times a second in a burst; 400 cut the webhook's
		// CPU per request by about a third in make bench-webhook, for ~5x a small live heap.
		debug.SetGCPercent(400)
	}
	log := textlogger.NewLogger(textlogger.NewConfig(textlogger.Verbosity(f.verbosity), textlogger.Output(cmd.ErrOrStderr())))
	restConfig, err := loadRESTConfig(f.kubeconfig)
	if err != nil {
		return err
	}
	protected := []string{"kube-system", f.namespace}
	var admissionKey fairwayv1.AdmissionKey
	if f.admissionKeyFile != "" {
		if admissionKey, err = fairwayv1.LoadAdmissionKey(f.admissionKeyFile); err != nil {
			return fmt.Errorf("--admission-key-file: %w", err)
		}
	}
	cfg := mutatingwebhook.Config{
		Options: mutatingwebhook.Options{
			ProtectedNamespaces: protected,
			TakeOverSchedulers:  f.takeOverSchedulers,
			MPSVolumes:          f.mpsVolumes,
			AdmissionKey:        admissionKey,
		},
		Configuration: mutatingwebhook.ConfigurationOptions{
			Name:                f.configurationName,
			ProtectedNamespaces: protected,
			ServiceNamespace:    f.namespace,
			ServiceName:         f.serviceName,
			ServicePort:         f.servicePort,
			URL:                 strings.TrimSuffix(f.webhookURL, "/"),
			TimeoutSeconds:      f.timeoutSeconds,
		},
		ManageConfiguration: f.manageConfiguration,
		Certs: certs.Options{
			Mode:            certs.Mode(f.certMode),
			Dir:             f.certDir,
			SecretNamespace: f.namespace,
			SecretName:      f.certSecret,
			WriteFiles:      f.writeCertFiles,
		},
		Host:          f.host,
		Port:          f.port,
		EnableHTTP2:   f.enableHTTP2,
		MetricsAddr:   f.metricsAddr,
		ProbeAddr:     f.probeAddr,
		PprofAddr:     f.pprofAddr,
		ObjectTimeout: f.objectTimeout,
	}
	if f.webhookURL != "" {
		u, err := url.Parse(f.webhookURL)
		if err != nil || u.Scheme != "https" || u.Hostname() == "" {
			return fmt.Errorf("--webhook-url %q: must be an https URL with a host name", f.webhookURL)
		}
		cfg.Certs.DNSNames = []string{u.Hostname()}
	} else {
		svc := f.serviceName + "." + f.namespace
		cfg.Certs.DNSNames = []string{svc + ".svc", svc + ".svc.cluster.local", svc, f.serviceName}
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return mutatingwebhook.Run(ctx, restConfig, cfg, log)
}

func loadRESTConfig(kubeconfig string) (*rest.Config, error) {
	cfg, err := restConfig(kubeconfig, "")
	if err != nil {
		return nil, err
	}
	// Admission reads come from informers; only start-up, certificates and the configuration use
	// the API directly.
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
