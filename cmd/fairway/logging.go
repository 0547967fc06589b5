package main

import (
	"flag"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// bindZap adds the zap logging flags to a command. It lives outside agent.go, which needs cgo, so
// that the console and the scheduler keep their logging flags in a CGO_ENABLED=0 build.
func bindZap(cmd *cobra.Command, o *zap.Options) {
	gfs := flag.NewFlagSet("zap", flag.ContinueOnError)
	o.BindFlags(gfs)
	cmd.Flags().AddGoFlagSet(gfs)
}

// setupLogging makes one logger for controller-runtime and klog alike, so that client-go's and
// fairway's lines come out in the same format.
func setupLogging(o *zap.Options) logr.Logger {
	log := zap.New(zap.UseFlagOptions(o))
	ctrl.SetLogger(log)
	klog.SetLogger(log)
	return log
}
