// Command demo is what `make demo` runs: a local cluster with four fake nodes of eight H100 GPUs
// each, fairway installed from its Helm chart, the real Argo workflow-controller and KubeRay
// operator, and the product story played in four acts with a live view of the queues and GPUs
// (see package story). Ctrl-C stops everything. With -check (`make demo-check`) it plays the
// same story without a terminal and exits 0 only when every act's outcome was observed.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr/funcr"
	"golang.org/x/term"

	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/demo/story"
	"github.com/fairway-sched/fairway/test/fairwayproc"
)

// needed are the binaries the demo runs besides fairway.
var needed = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kwok", "kubectl", "helm", "workflow-controller", "ray-operator"}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run() (err error) {
	nodesFile := flag.String("nodes", "", "YAML file of node pools (see test/demo/nodes.yaml); default: 4 nodes of 8 H100 GPUs. The story expects 32 GPUs.")
	check := flag.Bool("check", false, "Play the story without a terminal view and exit 0 only when every outcome was observed (make demo-check).")
	pace := flag.Duration("pace", 20*time.Second, "How long each act's outcome stays on screen before the next act (make demo DEMO_PACE=40s).")
	step := flag.Bool("step", false, "Wait for Enter before each next act instead of -pace (make demo DEMO_STEP=1).")
	plain := flag.Bool("plain", false, "Print plain lines even on a terminal.")
	consoleAddr := flag.String("console", "127.0.0.1:8080", "Serve fairway's web console here (another free port when it is taken); empty: no console.")
	flag.Parse()
	if *pace < 0 {
		return fmt.Errorf("-pace %v: must not be negative", *pace)
	}
	var next chan struct{}
	if *step && !*check {
		if !term.IsTerminal(int(os.Stdin.Fd())) {
			return errors.New("-step reads Enter from a terminal, but stdin is not one: run make demo DEMO_STEP=1 from a terminal, or use -pace")
		}
		next = make(chan struct{})
		go readEnters(next)
	}
	// Writes to a closed pipe return an error instead of killing the demo: with `make demo | less`,
	// Ctrl-C ends the reader first, and the demo must still stop the cluster and remove its files.
	signal.Ignore(syscall.SIGPIPE)
	pools := []cluster.NodePool{cluster.H100Pool(4)}
	if *nodesFile != "" {
		var err error
		if pools, err = cluster.LoadNodePools(*nodesFile); err != nil {
			return err
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	// Component messages go to stderr, except while the live view owns the terminal.
	var quiet atomic.Bool
	log := funcr.New(func(_, args string) {
		if !quiet.Load() {
			fmt.Fprintln(os.Stderr, "demo:", args)
		}
	}, funcr.Options{})

	begin := time.Now()
	if err := ensureBinaries(ctx); err != nil {
		return err
	}
	bin, cleanup, err := fairwayBinary(ctx)
	if err != nil {
		return err
	}
	defer cleanup()
	fmt.Printf("Starting a local cluster: etcd, kube-apiserver, kube-controller-manager, kwok with %s...\n", describePools(pools))
	c, err := cluster.Start(ctx, cluster.Config{NodePools: pools, SkipCRDs: true, Logger: log})
	if err != nil {
		return err
	}
	fmt.Printf("Component logs: %s (removed on exit, kept when the demo fails)\n", c.LogDir())
	defer func() {
		quiet.Store(false)
		stopCluster(c, err != nil && !errors.Is(err, context.Canceled))
	}()

	fd := int(os.Stdout.Fd())
	live := !*check && !*plain && term.IsTerminal(fd)
	width, height := 100, 40
	if w, h, err := term.GetSize(fd); err == nil && live {
		width, height = max(w, 80), max(h, 30)
	}
	opts := story.Options{Check: *check, Live: live, Width: width, Height: height, Pace: *pace, Next: next, Out: os.Stdout, Binary: bin, Log: log}
	if !*check && !live {
		fmt.Println("No live view (stdout is not a terminal, or -plain): the story prints plain lines and the state after each act.")
	}
	env, err := story.Setup(ctx, c, opts)
	if err != nil {
		return err
	}
	defer env.Stop()
	consoleURL := ""
	if !*check && *consoleAddr != "" {
		if consoleURL, err = startConsole(ctx, c, bin, *consoleAddr); err != nil {
			return err
		}
		fmt.Printf("Web console (read-only, updates live): %s\n", consoleURL)
	}
	if !*check {
		fmt.Printf("Playing the story in 4 acts. Ctrl-C stops everything; meanwhile:\n  export KUBECONFIG=%s\n  %s queues\n",
			c.Kubeconfig(), filepath.Join(c.BinDir(), "kubectl-fairway"))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(3 * time.Second):
		}
	}
	quiet.Store(live)
	results, err := story.Play(ctx, env)
	quiet.Store(false)
	if *check {
		fmt.Printf("\ndemo-check: %d of 4 acts in %v (including the cluster start)\n%s", len(results), time.Since(begin).Round(100*time.Millisecond), story.Summary(results))
		if err != nil {
			return err
		}
		fmt.Println("demo-check: every outcome observed")
		return nil
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
	if !live {
		// The live view says it on screen; plain output must too, or a piped demo just stops talking.
		fmt.Printf("The story is over. The cluster keeps running until Ctrl-C, which stops fairway and the cluster and removes their files:\n  export KUBECONFIG=%s\n  %s queues\n  %s jobs -A\n",
			c.Kubeconfig(), filepath.Join(c.BinDir(), "kubectl-fairway"), filepath.Join(c.BinDir(), "kubectl-fairway"))
		if consoleURL != "" {
			fmt.Printf("  the web console: %s\n", consoleURL)
		}
	}
	quiet.Store(live)
	env.Watch(ctx)
	return nil
}

// describePools says what nodes pools make, as the start line prints it: "4 fake nodes of 8 H100
// GPUs" by default, the -nodes file's own pools otherwise (it printed the default's whatever the
// file said).
func describePools(pools []cluster.NodePool) string {
	parts := make([]string, 0, len(pools))
	for _, p := range pools {
		what := "fake nodes"
		if p.Count == 1 {
			what = "fake node"
		}
		gpus := "without GPUs"
		if p.GPUsPerNode > 0 {
			gpus = strings.Join(strings.Fields(fmt.Sprintf("of %d %s GPU", p.GPUsPerNode, p.GPUType)), " ")
			if p.GPUsPerNode > 1 {
				gpus += "s"
			}
		}
		parts = append(parts, fmt.Sprintf("%d %s %s", p.Count, what, gpus))
	}
	if len(parts) == 0 {
		return "no nodes"
	}
	return strings.Join(parts, ", ")
}

// stopCluster stops the cluster and removes its files, keeping the component logs first when the
// demo failed.
func stopCluster(c *cluster.Cluster, failed bool) {
	if failed {
		if kept, kerr := keepLogs(c.LogDir()); kerr != nil {
			fmt.Fprintln(os.Stderr, "demo: keeping the component logs:", kerr)
		} else {
			fmt.Fprintf(os.Stderr, "demo: the component logs are kept in %s\n", kept)
		}
	}
	fmt.Println("\nStopping fairway, the operators and the cluster...")
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
	}
	fmt.Println("Stopped; temporary files removed.")
}

// keepLogs copies the cluster's component logs out of its work directory, which Stop removes,
// into a new temporary directory, so that a failed demo can be looked into afterwards.
func keepLogs(dir string) (string, error) {
	kept, err := os.MkdirTemp("", "fairway-demo-logs-")
	if err != nil {
		return "", err
	}
	if err := os.CopyFS(kept, os.DirFS(dir)); err != nil {
		return "", fmt.Errorf("copying %s to %s: %w", dir, kept, err)
	}
	return kept, nil
}

// readEnters sends a value on next for every line read from stdin: step mode's Enter. An Enter
// pressed while an act plays, when nothing waits for one, is dropped rather than kept for later:
// it would skip the next pause unseen.
func readEnters(next chan<- struct{}) {
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		select {
		case next <- struct{}{}:
		default:
		}
	}
}

// ensureBinaries builds what is missing from bin/ with hack/build-tools.sh, showing its progress.
// `make demo` has built them already; `go run ./test/demo` on a fresh clone has not.
func ensureBinaries(ctx context.Context) error {
	bin, err := cluster.BinDir()
	if err != nil {
		return err
	}
	var missing []string
	for _, name := range needed {
		if _, err := os.Stat(filepath.Join(bin, name)); errors.Is(err, os.ErrNotExist) {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	root, err := cluster.RepoRoot()
	if err != nil {
		return err
	}
	fmt.Printf("Building %s into %s (a cold build takes 15-20 minutes on 2 cores)...\n", strings.Join(missing, ", "), bin)
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "build-tools.sh"), missing...)
	cmd.Env = append(os.Environ(), "BIN="+bin)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building the cluster binaries: %w", err)
	}
	return nil
}

// fairwayBinary is $FAIRWAY_BINARY (make demo builds bin/fairway) or a fresh build of this tree
// into a temporary directory that cleanup removes.
func fairwayBinary(ctx context.Context) (bin string, cleanup func(), err error) {
	if os.Getenv(fairwayproc.BinaryEnv) == "" {
		fmt.Println("Building fairway (go build ./cmd/fairway)...")
	}
	dir, err := os.MkdirTemp("", "fairway-demo-")
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	if bin, err = fairwayproc.Build(ctx, dir); err != nil {
		cleanup()
		return "", nil, err
	}
	return bin, cleanup, nil
}

// startConsole runs `fairway console` in local mode (the cluster admin's view, on loopback) at
// addr, or at a free port when addr is taken, and returns its URL once it serves.
func startConsole(ctx context.Context, c *cluster.Cluster, bin, addr string) (string, error) {
	if ln, err := net.Listen("tcp", addr); err == nil {
		_ = ln.Close()
	} else {
		port, err := cluster.FreePort()
		if err != nil {
			return "", err
		}
		addr = fmt.Sprintf("127.0.0.1:%d", port)
	}
	if _, err := c.StartProcess(cluster.ProcessSpec{Name: "fairway-console", Path: bin,
		Args: []string{"console", "--auth=local", "--listen=" + addr, "--kubeconfig=" + c.Kubeconfig(), "--history-interval=5s"}}); err != nil {
		return "", fmt.Errorf("starting the web console: %w", err)
	}
	url := "http://" + addr
	deadline := time.Now().Add(60 * time.Second)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/healthz", nil)
		if err != nil {
			return "", err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return "", fmt.Errorf("the web console did not serve %s within a minute (its log: %s)", url, filepath.Join(c.LogDir(), "fairway-console.log"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
