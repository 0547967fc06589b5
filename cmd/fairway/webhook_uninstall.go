package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// newWebhookUninstallCommand is `fairway webhook uninstall`, which the Helm chart runs after the
// release is deleted: the webhook creates its MutatingWebhookConfiguration itself, so Helm does
// not delete it, and left behind with no webhook its Fail policy refuses every pod of the served
// namespaces.
func newWebhookUninstallCommand() *cobra.Command {
	var (
		kubeconfig, name string
		settle           time.Duration
	)
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Delete the webhook's MutatingWebhookConfiguration (after the webhook is gone)",
		Long: `Delete the MutatingWebhookConfiguration the webhook keeps, then watch it for --settle and
delete it again should a webhook replica that is still stopping re-create it. Run it once the
webhook's Deployment is deleted (the Helm chart's post-delete hook does): a running webhook
re-creates its configuration at once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			cfg, err := loadRESTConfig(kubeconfig)
			if err != nil {
				return err
			}
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			return uninstallConfiguration(ctx, cs, name, settle, func(msg string) { fmt.Fprintln(cmd.OutOrStdout(), msg) })
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&kubeconfig, "kubeconfig", "", "Path to a kubeconfig; in-cluster configuration or $KUBECONFIG when empty.")
	fs.StringVar(&name, "configuration-name", "fairway-webhook", "Name of the MutatingWebhookConfiguration.")
	fs.DurationVar(&settle, "settle", 15*time.Second, "How long to watch for a re-created configuration after deleting it.")
	return cmd
}

// uninstallConfiguration deletes the configuration and keeps it deleted for settle.
func uninstallConfiguration(ctx context.Context, cs kubernetes.Interface, name string, settle time.Duration, report func(string)) error {
	api := cs.AdmissionregistrationV1().MutatingWebhookConfigurations()
	deadline := time.Now().Add(settle)
	for {
		_, err := api.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("reading MutatingWebhookConfiguration %s: %w", name, err)
		default:
			if err := api.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting MutatingWebhookConfiguration %s: %w", name, err)
			}
			report("deleted MutatingWebhookConfiguration " + name)
		}
		if !time.Now().Before(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
