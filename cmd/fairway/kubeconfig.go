package main

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// restConfig loads the client configuration every component starts from, by client-go's
// standard rules: the --kubeconfig path when set, else $KUBECONFIG, else ~/.kube/config, else
// the in-cluster configuration of the pod. userAgent, when set, names the component in the API
// server's logs and audit records.
func restConfig(kubeconfig, userAgent string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	if userAgent != "" {
		cfg.UserAgent = userAgent
	}
	return cfg, nil
}
