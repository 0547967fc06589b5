// Package stack runs the whole of fairway against a local test cluster (test/cluster) as local
// processes: one gpu-agent per fake GPU node (on go-nvml mocks, with a kubelet PodResources
// stand-in), the scheduler and the admission webhook. Examples' e2e tests, the dashboards check,
// the idle-lending test and the demo start fairway through it, so they all run it the same way.
package stack

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/fairwayproc"
	"github.com/fairway-sched/fairway/test/gpuagents"
)

// Options say which components to run and how. The zero value runs all three with test-speed
// settings.
type Options struct {
	// Binary is the fairway binary; fairwayproc.Build's choice when empty.
	Binary string
	// Namespace is fairway's own namespace; fairwayproc.DefaultNamespace when empty. Start
	// creates it and the default PriorityClasses.
	Namespace string

	// NoAgents, NoScheduler and NoWebhook leave a component out.
	NoAgents, NoScheduler, NoWebhook bool

	// Agents configures the gpu-agents; Nodes is filled with every fake GPU node when empty.
	Agents gpuagents.Options
	// SchedulerArgs and WebhookArgs are appended to the components' flags.
	SchedulerArgs, WebhookArgs []string
	// ProbeNamespace is a namespace some Queue serves, which the webhook must rewrite before
	// Start returns; without one Start does not wait for the webhook to be called.
	ProbeNamespace string
	// RunAs runs components as other users than the cluster admin: each component's requests
	// impersonate its user, e.g. the chart's ServiceAccounts, so it has exactly their RBAC.
	RunAs Identities

	Log logr.Logger
}

// Identities name a user per component (see cluster.ServiceAccountUser); empty runs a component
// as the cluster admin.
type Identities struct {
	Scheduler, Webhook, Agent string
}

// Stack is a running fairway.
type Stack struct {
	Binary    string
	Agents    *gpuagents.Fleet
	Scheduler *fairwayproc.Scheduler
	Webhook   *fairwayproc.Webhook
	workDir   string
	// schedOpts start the scheduler again (RestartScheduler); restarts counts the restarts,
	// whose processes are named fairway-scheduler-restart-N.
	schedOpts fairwayproc.SchedulerOptions
	restarts  int
}

// Start runs the components Options ask for, in dependency order (agents publish the GPU
// inventory the scheduler places shares by; the webhook comes last so that pods are only
// rewritten once something schedules them), and returns once each is ready.
func Start(ctx context.Context, c *cluster.Cluster, o Options) (_ *Stack, err error) {
	if o.Namespace == "" {
		o.Namespace = fairwayproc.DefaultNamespace
	}
	s := &Stack{}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	if s.workDir, err = os.MkdirTemp("", "fairway-stack-"); err != nil {
		return nil, err
	}
	if s.Binary = o.Binary; s.Binary == "" {
		if s.Binary, err = fairwayproc.Build(ctx, s.workDir); err != nil {
			return nil, err
		}
	}
	if err := fairwayproc.EnsureSystem(ctx, c, o.Namespace); err != nil {
		return nil, err
	}
	as := func(user string) ([]string, error) {
		if user == "" {
			return nil, nil
		}
		kc, err := c.KubeconfigAs(user)
		return []string{"--kubeconfig=" + kc}, err
	}
	if !o.NoAgents {
		ao := o.Agents
		if user := o.RunAs.Agent; user != "" {
			// Each agent is its node's pod: its identity carries the node's name.
			ao.NodeArgs = func(node string) ([]string, error) {
				kc, err := c.KubeconfigAsNode(user, node)
				return []string{"--kubeconfig=" + kc}, err
			}
		}
		ao.Binary = s.Binary
		if ao.Log.GetSink() == nil {
			ao.Log = o.Log
		}
		if len(ao.Nodes) == 0 {
			if ao.Nodes, err = gpuagents.GPUNodes(ctx, c); err != nil {
				return nil, err
			}
		}
		if s.Agents, err = gpuagents.Start(ctx, c, ao); err != nil {
			return nil, fmt.Errorf("starting gpu-agents: %w", err)
		}
	}
	// With both the webhook and the scheduler, the webhook seals what it admits and the
	// scheduler places only sealed pods, as the chart runs them.
	var sealArgs []string
	if !o.NoScheduler && !o.NoWebhook {
		key := filepath.Join(s.workDir, "admission-key")
		if err := os.WriteFile(key, []byte(rand.Text()+rand.Text()), 0o600); err != nil {
			return nil, err
		}
		sealArgs = []string{"--admission-key-file=" + key}
	}
	if !o.NoScheduler {
		kc, err := as(o.RunAs.Scheduler)
		if err != nil {
			return nil, err
		}
		s.schedOpts = fairwayproc.SchedulerOptions{
			Binary: s.Binary, Namespace: o.Namespace, Args: slices.Concat(o.SchedulerArgs, sealArgs, kc),
		}
		if s.Scheduler, err = fairwayproc.StartScheduler(ctx, c, s.schedOpts); err != nil {
			return nil, err
		}
	}
	if !o.NoWebhook {
		kc, err := as(o.RunAs.Webhook)
		if err != nil {
			return nil, err
		}
		if s.Webhook, err = fairwayproc.StartWebhook(ctx, c, fairwayproc.WebhookOptions{
			Binary: s.Binary, Namespace: o.Namespace, ProbeNamespace: o.ProbeNamespace, Args: slices.Concat(o.WebhookArgs, sealArgs, kc),
			Timeout: 90 * time.Second,
		}); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// RestartScheduler kills the scheduler as a crash would (SIGKILL: no Lease released, nothing
// flushed) and starts another with the same flags, returning once the new one leads: it
// rebuilds its view from what the API server holds, as a new leader does.
func (s *Stack) RestartScheduler(ctx context.Context, c *cluster.Cluster) error {
	if s.Scheduler == nil {
		return errors.New("the stack runs no scheduler")
	}
	if err := syscall.Kill(s.Scheduler.Pid(), syscall.SIGKILL); err != nil {
		return fmt.Errorf("killing the scheduler: %w", err)
	}
	<-s.Scheduler.Done()
	s.restarts++
	o := s.schedOpts
	o.NoWait = true
	o.Name = fmt.Sprintf("fairway-scheduler-restart-%d", s.restarts)
	next, err := fairwayproc.StartScheduler(ctx, c, o)
	if err != nil {
		return err
	}
	s.Scheduler = next
	// Ready says nothing of leading (a standby is ready too): the leader gauge does.
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, next.MetricsURL, nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return err == nil && regexp.MustCompile(`(?m)^fairway_leader 1$`).Match(body), nil
	})
}

// Stop stops every component Start started (the cluster stops the processes too, so this is
// for tests that outlive a stack).
func (s *Stack) Stop() {
	var errs []error
	if s.Webhook != nil {
		errs = append(errs, s.Webhook.Process.Stop())
	}
	if s.Scheduler != nil {
		errs = append(errs, s.Scheduler.Stop())
	}
	if s.Agents != nil {
		s.Agents.Stop()
	}
	if s.workDir != "" {
		errs = append(errs, os.RemoveAll(s.workDir))
	}
	_ = errors.Join(errs...)
}
