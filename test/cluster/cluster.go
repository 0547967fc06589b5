package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// Cluster is a running local control plane. All methods are safe for concurrent use.
type Cluster struct {
	cfg        Config
	log        logr.Logger
	binDir     string
	workDir    string
	logDir     string
	ownWorkDir bool

	pki        *pki
	apiPort    int
	kwokServer string // kwok's server, with Config.KwokMetrics
	serviceIP  net.IP
	kubeconfig string
	restConfig *rest.Config
	scheme     *runtime.Scheme
	client     client.Client
	clientset  kubernetes.Interface

	mu       sync.Mutex
	procs    []*Process     // in start order; stopped in reverse
	poolNext map[string]int // next node index per pool name
	stopOnce sync.Once
	stopErr  error
}

// Start brings up etcd, kube-apiserver, kube-controller-manager and kwok (plus kube-scheduler
// when asked), creates the configured nodes, applies the CRDs, and returns once the API server is
// ready, the default ServiceAccount exists (so pods can be created) and every node is Ready and
// schedulable. Call Stop when done; tests should use StartT, which does.
//
// On failure every process is stopped and the error names the directory that keeps their logs.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	c, err := start(ctx, cfg)
	if err != nil {
		if c != nil {
			c.stopProcesses()
			err = fmt.Errorf("%w (component logs kept in %s)", err, c.logDir)
		}
		return nil, err
	}
	return c, nil
}

// start does Start's work and returns the cluster even on error, so the caller can stop what
// runs and rescue the logs.
func start(ctx context.Context, cfg Config) (*Cluster, error) {
	begin := time.Now()
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()

	c, err := newCluster(cfg)
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return c, err
	}
	etcdPort, peerPort := ports[0], ports[1]
	c.apiPort = ports[2]

	// etcd starts while the certificates are made; the API server retries etcd until it answers.
	if _, err := c.startEtcd(etcdPort, peerPort); err != nil {
		return c, err
	}
	_, serviceNet, _ := net.ParseCIDR(ServiceCIDR)
	firstServiceIP := slices.Clone(serviceNet.IP.To4())
	firstServiceIP[3]++
	c.serviceIP = firstServiceIP
	if c.pki, err = newPKI(filepath.Join(c.workDir, "pki"), firstServiceIP); err != nil {
		return c, err
	}
	if err := c.initClients(); err != nil {
		return c, err
	}
	apiserver, err := c.startAPIServer(etcdPort)
	if err != nil {
		return c, err
	}
	if err := c.waitAPIServer(ctx, apiserver); err != nil {
		return c, err
	}
	c.log.Info("API server ready", "url", c.restConfig.Host, "after", time.Since(begin).Round(time.Millisecond))

	if _, err := c.startControllerManager(); err != nil {
		return c, err
	}
	if _, err := c.startKwok(); err != nil {
		return c, err
	}
	if cfg.KubeScheduler {
		if _, err := c.StartKubeScheduler(ctx); err != nil {
			return c, err
		}
	}

	// Nodes, CRDs and the default ServiceAccount do not depend on each other.
	var wg sync.WaitGroup
	errs := make([]error, 3)
	wg.Go(func() { _, errs[0] = c.AddNodes(ctx, cfg.NodePools...) })
	wg.Go(func() {
		if cfg.SkipCRDs {
			return
		}
		dirs := cfg.CRDDirs
		if dirs == nil {
			root, err := RepoRoot()
			if err != nil {
				errs[1] = err
				return
			}
			dirs = []string{filepath.Join(root, "charts", "fairway", "crds")}
		}
		errs[1] = c.ApplyCRDs(ctx, dirs...)
	})
	wg.Go(func() { errs[2] = c.waitDefaultServiceAccount(ctx) })
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	if err := c.WaitNodesReady(ctx); err != nil {
		return c, err
	}
	if cfg.LocalPathProvisioner {
		if _, err := c.StartLocalPathProvisioner(ctx); err != nil {
			return c, err
		}
	}
	c.log.Info("cluster ready", "nodes", c.nodeCount(), "after", time.Since(begin).Round(time.Millisecond), "kubeconfig", c.kubeconfig)
	return c, nil
}

func newCluster(cfg Config) (*Cluster, error) {
	c := &Cluster{cfg: cfg, log: cfg.Logger, workDir: cfg.WorkDir, poolNext: map[string]int{}}
	if c.log.GetSink() == nil {
		c.log = logr.Discard()
	}
	var err error
	if c.binDir = cfg.BinDir; c.binDir == "" {
		if c.binDir, err = BinDir(); err != nil {
			return nil, err
		}
	}
	if c.workDir == "" {
		if c.workDir, err = os.MkdirTemp("", "fairway-cluster-"); err != nil {
			return nil, fmt.Errorf("creating the work directory: %w", err)
		}
		c.ownWorkDir = true
	}
	c.logDir = filepath.Join(c.workDir, "logs")
	if err := os.MkdirAll(c.logDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the log directory: %w", err)
	}
	c.kubeconfig = filepath.Join(c.workDir, "kubeconfig")
	return c, nil
}

// initClients builds the admin REST config, writes the kubeconfig file the components use, and
// makes the clients. Nothing here talks to the API server yet.
func (c *Cluster) initClients() error {
	host := "https://127.0.0.1:" + strconv.Itoa(c.apiPort)
	c.restConfig = &rest.Config{
		Host: host,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   c.pki.caPEM,
			CertData: c.pki.adminCertPEM,
			KeyData:  c.pki.adminKeyPEM,
		},
		// Tests create objects in bursts; client-go's default of 5 QPS would be the bottleneck.
		QPS:   200,
		Burst: 400,
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["fairway"] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: c.pki.caPEM}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: c.pki.adminCertPEM, ClientKeyData: c.pki.adminKeyPEM}
	kc.Contexts["fairway"] = &clientcmdapi.Context{Cluster: "fairway", AuthInfo: "admin", Namespace: "default"}
	kc.CurrentContext = "fairway"
	if err := clientcmd.WriteToFile(*kc, c.kubeconfig); err != nil {
		return fmt.Errorf("writing the kubeconfig: %w", err)
	}

	c.scheme = runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(c.scheme); err != nil {
		return fmt.Errorf("building the scheme: %w", err)
	}
	if err := fairwayv1.AddToScheme(c.scheme); err != nil {
		return fmt.Errorf("building the scheme: %w", err)
	}
	var err error
	if c.client, err = client.New(c.restConfig, client.Options{Scheme: c.scheme}); err != nil {
		return fmt.Errorf("creating the client: %w", err)
	}
	if c.clientset, err = kubernetes.NewForConfig(c.restConfig); err != nil {
		return fmt.Errorf("creating the clientset: %w", err)
	}
	return nil
}

// waitAPIServer polls /readyz, which turns ok once etcd answers and the post-start hooks
// (bootstrap RBAC roles, priority classes) are done: usually a few seconds.
func (c *Cluster) waitAPIServer(ctx context.Context, apiserver *Process) error {
	rc := c.clientset.Discovery().RESTClient()
	return poll(ctx, 100*time.Millisecond, "the API server to be ready", []*Process{apiserver}, func(ctx context.Context) (bool, error) {
		body, err := rc.Get().AbsPath("/readyz").Timeout(2 * time.Second).DoRaw(ctx)
		return err == nil && string(body) == "ok", nil
	})
}

// waitDefaultServiceAccount waits for the service-account controller to create the default
// ServiceAccount in the default namespace; until then the API server refuses pods there.
func (c *Cluster) waitDefaultServiceAccount(ctx context.Context) error {
	return poll(ctx, 100*time.Millisecond, "the default ServiceAccount", c.Processes(), func(ctx context.Context) (bool, error) {
		_, err := c.clientset.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// RESTConfig returns a copy of the admin REST config (client certificate of AdminUser, who is
// in system:masters).
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.restConfig) }

// APIPort is the port the API server listens on, at 127.0.0.1.
func (c *Cluster) APIPort() int { return c.apiPort }

// KubernetesServiceIP is the ClusterIP of the default/kubernetes Service (the first of
// ServiceCIDR), which the kubelet gives pods as KUBERNETES_SERVICE_HOST and the API server's
// certificate names. Nothing routes it unless something plays kube-proxy (test/nodes does).
func (c *Cluster) KubernetesServiceIP() net.IP { return slices.Clone(c.serviceIP) }

// Kubeconfig returns the path of the admin kubeconfig file, for kubectl and for processes.
func (c *Cluster) Kubeconfig() string { return c.kubeconfig }

// Client returns a controller-runtime client (no cache) whose scheme knows the built-in types
// and fairway's API.
func (c *Cluster) Client() client.Client { return c.client }

// Clientset returns a client-go clientset for the built-in types.
func (c *Cluster) Clientset() kubernetes.Interface { return c.clientset }

// Scheme returns the scheme of Client.
func (c *Cluster) Scheme() *runtime.Scheme { return c.scheme }

// AdminToken returns a bearer token of AdminUser from the API server's static token file, for
// clients that cannot use the client certificate (curl, a browser).
func (c *Cluster) AdminToken() string { return c.pki.adminToken }

// CAFile returns the path of the cluster CA certificate; it signs the API server's serving
// certificate and is the root CA pods see.
func (c *Cluster) CAFile() string { return c.pki.caCert }

// WorkDir returns the directory with the cluster's certificates, kubeconfig, data and logs.
func (c *Cluster) WorkDir() string { return c.workDir }

// KwokServerURL is kwok's HTTP server (http://127.0.0.1:<port>) with Config.KwokMetrics, "" without.
func (c *Cluster) KwokServerURL() string { return c.kwokServer }

// KubeletResourceMetricsPath is where KwokServerURL serves a fake node's kubelet resource metrics
// (what a kubelet serves at /metrics/resource), with Config.KwokMetrics.
func KubeletResourceMetricsPath(node string) string {
	return "/metrics/nodes/" + node + "/metrics/resource"
}

// LogDir returns the directory that holds one <process>.log per started process.
func (c *Cluster) LogDir() string { return c.logDir }

// BinDir returns the directory the binaries are taken from.
func (c *Cluster) BinDir() string { return c.binDir }

// StartProcess starts a process against the cluster: KUBECONFIG is the admin kubeconfig unless
// spec.Env sets it, output goes to LogDir()/<name>.log, and Stop stops it (before the control
// plane). A bare spec.Path is looked up in BinDir().
func (c *Cluster) StartProcess(spec ProcessSpec) (*Process, error) {
	if !filepath.IsAbs(spec.Path) && filepath.Base(spec.Path) == spec.Path {
		p, err := binary(c.binDir, spec.Path)
		if err != nil {
			return nil, err
		}
		spec.Path = p
	}
	if spec.Dir == "" {
		spec.Dir = c.workDir
	}
	spec.Env = append([]string{"KUBECONFIG=" + c.kubeconfig}, spec.Env...)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.procs {
		if p.name == spec.Name {
			return nil, fmt.Errorf("a process named %s already runs in this cluster", spec.Name)
		}
	}
	p, err := startProcess(spec, c.logDir, c.log)
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	return p, nil
}

// Processes returns the processes started so far, in start order.
func (c *Cluster) Processes() []*Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.procs)
}

// Stop stops every process, newest first (operators and the scheduler before kwok, the
// controller manager, the API server and etcd), and removes the work directory unless it was
// given in Config. It is idempotent.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		c.stopProcesses()
		if c.ownWorkDir {
			if err := os.RemoveAll(c.workDir); err != nil {
				c.stopErr = fmt.Errorf("removing the work directory: %w", err)
			}
		}
	})
	return c.stopErr
}

// stopProcesses stops everything but the API server and etcd in parallel (they do not depend on
// each other), then the API server, then etcd, so no component spends its shutdown retrying a
// dead API server.
func (c *Cluster) stopProcesses() {
	procs := c.Processes()
	var core, others []*Process
	for _, p := range procs {
		if p.name == "etcd" || p.name == "kube-apiserver" {
			core = append(core, p)
		} else {
			others = append(others, p)
		}
	}
	var wg sync.WaitGroup
	for _, p := range others {
		wg.Go(func() { _ = p.Stop() })
	}
	wg.Wait()
	for _, p := range slices.Backward(core) {
		_ = p.Stop()
	}
}
