package cluster

import (
	"fmt"
	"path/filepath"
	"regexp"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/fairway-sched/fairway/api/v1alpha1"
)

// ServiceAccountUser is the user name the API server gives a ServiceAccount's requests.
func ServiceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// KubeconfigAs writes a kubeconfig whose requests impersonate user (the admin's client
// certificate may impersonate anyone), and returns its path. A process run with it has exactly
// the permissions RBAC gives user: for a ServiceAccount (see ServiceAccountUser) the API server
// adds its groups (system:serviceaccounts, system:serviceaccounts:<namespace>,
// system:authenticated) as it would for the account's own token. The API server's audit log
// records the requests under impersonatedUser.
func (c *Cluster) KubeconfigAs(user string) (string, error) { return c.KubeconfigAsNode(user, "") }

// KubeconfigAsNode is KubeconfigAs for the ServiceAccount of a pod on node (none when ""): the
// impersonated user also carries the node's name in its extra (v1alpha1.NodeNameExtra), as the
// API server gives a token bound to a pod on that node (Kubernetes 1.32+).
func (c *Cluster) KubeconfigAsNode(user, node string) (string, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["fairway"] = &clientcmdapi.Cluster{Server: c.restConfig.Host, CertificateAuthorityData: c.pki.caPEM}
	as := &clientcmdapi.AuthInfo{ClientCertificateData: c.pki.adminCertPEM, ClientKeyData: c.pki.adminKeyPEM, Impersonate: user}
	name := user
	if node != "" {
		as.ImpersonateUserExtra = map[string][]string{v1alpha1.NodeNameExtra: {node}}
		name += "-on-" + node
	}
	kc.AuthInfos["as"] = as
	kc.Contexts["fairway"] = &clientcmdapi.Context{Cluster: "fairway", AuthInfo: "as", Namespace: "default"}
	kc.CurrentContext = "fairway"
	path := filepath.Join(c.workDir, "kubeconfig-as-"+regexp.MustCompile(`[^A-Za-z0-9._-]+`).ReplaceAllString(name, "_"))
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return "", fmt.Errorf("writing the kubeconfig of %s: %w", user, err)
	}
	return path, nil
}
