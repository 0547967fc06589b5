package cluster

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	"github.com/fairway-sched/fairway/api/nodepool"
)

// startEtcd starts a single-member etcd on free loopback ports. fsync is off: the data lives in a
// temporary directory and nothing survives the test anyway.
func (c *Cluster) startEtcd(clientPort, peerPort int) (*Process, error) {
	client := "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peer := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	return c.startBin("etcd", "etcd", []string{
		"--name=default",
		"--data-dir=" + filepath.Join(c.workDir, "etcd"),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=default=" + peer,
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	}, nil)
}

// HTTPOK reports whether a GET of url answers 200: the readiness check of the components
// here and of fairway's own processes (fairwayproc).
func HTTPOK(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// startAPIServer starts kube-apiserver with client-certificate and token authentication,
// Node+RBAC authorization, the default admission plugins (webhooks included) and service-account
// tokens signed by a key made in Go.
func (c *Cluster) startAPIServer(etcdPort int) (*Process, error) {
	p := c.pki
	args := []string{
		"--etcd-servers=http://127.0.0.1:" + strconv.Itoa(etcdPort),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(c.apiPort),
		"--tls-cert-file=" + p.servingCert,
		"--tls-private-key-file=" + p.servingKey,
		"--client-ca-file=" + p.caCert,
		"--token-auth-file=" + p.tokenFile,
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p.saPub,
		"--service-account-signing-key-file=" + p.saKey,
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--allow-privileged=true",
		// Real kubelets (test/nodes) serve logs and exec to the admin's certificate, at the
		// InternalIP they report: their host names resolve nowhere.
		"--kubelet-client-certificate=" + p.adminCert,
		"--kubelet-client-key=" + p.adminKey,
		"--kubelet-preferred-address-types=InternalIP",
		// Since 1.37 the endpoint reconciler refuses a loopback advertise address; nothing in
		// this cluster reaches the API server through the kubernetes Service anyway.
		"--endpoint-reconciler-type=none",
		"--cert-dir=" + filepath.Join(c.workDir, "apiserver-certs"),
		"--v=1",
	}
	return c.startBin("kube-apiserver", "kube-apiserver", append(args, c.cfg.APIServerFlags...), nil)
}

// startControllerManager runs every default controller: service accounts and their tokens (pods
// are refused without the default ServiceAccount), the garbage collector, the workload
// controllers (Job, ReplicaSet, Deployment, ...), and node lifecycle, which removes the
// node.kubernetes.io/not-ready taint once kwok reports a node Ready.
func (c *Cluster) startControllerManager() (*Process, error) {
	p := c.pki
	args := []string{
		"--kubeconfig=" + c.kubeconfig,
		"--controllers=*",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + p.saKey,
		"--root-ca-file=" + p.caCert,
		"--cluster-signing-cert-file=" + p.caCert,
		"--cluster-signing-key-file=" + p.caKey,
		"--leader-elect=false",
		"--secure-port=0",
		// Notice node changes fast; the defaults (5s) are made for real kubelets.
		"--node-monitor-period=1s",
		"--v=1",
	}
	return c.startBin("kube-controller-manager", "kube-controller-manager", append(args, c.cfg.ControllerManagerFlags...), nil)
}

// startKwok runs kwok for the nodes annotated kwok.x-k8s.io/node=fake, with node leases (what
// node lifecycle watches) and the embedded stages.
func (c *Cluster) startKwok() (*Process, error) {
	conf := filepath.Join(c.workDir, "kwok.yaml")
	if err := writeKwokConfig(conf, c.cfg.KwokMetrics, c.cfg.KwokPodParallelism); err != nil {
		return nil, err
	}
	var server []string
	if c.cfg.KwokMetrics {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		c.kwokServer = "http://127.0.0.1:" + strconv.Itoa(port)
		server = []string{"--server-address=127.0.0.1:" + strconv.Itoa(port)}
	}
	args := []string{
		"--kubeconfig=" + c.kubeconfig,
		"--config=" + conf,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + nodepool.KwokNodeAnnotation + "=fake",
		"--node-lease-duration-seconds=40",
		"--cidr=" + PodCIDR,
		"--node-ip=10.63.0.1",
	}
	return c.startBin("kwok", "kwok", append(append(args, server...), c.cfg.KwokFlags...), nil)
}

// StartKubeScheduler starts the real kube-scheduler (if Config.KubeScheduler did not already),
// without leader election and without a serving port. extraArgs are appended to its flags.
func (c *Cluster) StartKubeScheduler(ctx context.Context, extraArgs ...string) (*Process, error) {
	args := []string{
		"--kubeconfig=" + c.kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		"--v=1",
	}
	args = append(args, c.cfg.SchedulerFlags...)
	return c.startBin("kube-scheduler", "kube-scheduler", append(args, extraArgs...), nil)
}

// startBin starts a binary from the bin directory with KUBECONFIG pointing at the cluster.
func (c *Cluster) startBin(name, bin string, args, env []string) (*Process, error) {
	path, err := binary(c.binDir, bin)
	if err != nil {
		return nil, err
	}
	return c.StartProcess(ProcessSpec{Name: name, Path: path, Args: args, Env: env})
}

// poll calls cond every interval until it returns true, an error, ctx ends, or one of the
// watched processes exits (then the error carries the tail of its log).
func poll(ctx context.Context, interval time.Duration, what string, watch []*Process, cond func(context.Context) (bool, error)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		for _, p := range watch {
			if exited, _ := p.Exited(); exited {
				return fmt.Errorf("waiting for %s: %w", what, p.exitError())
			}
		}
		ok, err := cond(ctx)
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
}
