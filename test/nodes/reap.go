package nodes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
)

// The labels on every node container. Stop removes what a Start made; these let a later Start
// remove it too when the process that started it died before its Stop (a test binary killed at
// its -timeout, a CI job cancelled), as its control plane dies with it (Pdeathsig, test/cluster).
const (
	// LabelNode holds the Node's name (docker ps --filter label=fairway.dev/test-node).
	LabelNode = "fairway.dev/test-node"
	// labelOwner is the starting process's "<pid>-<start time>" (processToken).
	labelOwner = "fairway.dev/test-owner"
	// labelNet is "<bridge>,<link>,<pod CIDR>": the host network state the node leaves.
	labelNet = "fairway.dev/test-node-net"
	// labelDir is the host directory of the Start's config, logs and sockets.
	labelDir = "fairway.dev/test-node-dir"
)

// ownerToken is this process's processToken, "" where /proc cannot say.
var ownerToken, _ = processToken(os.Getpid())

// processToken names a live process by its id and its start time (field 22 of
// /proc/<pid>/stat, in clock ticks since boot), so that a recycled process id does not pass for
// the process that started a node. ok is false when no such process runs.
func processToken(pid int) (token string, ok bool) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", false
	}
	// The command name (field 2) is in parentheses and may hold spaces or parentheses itself.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return "", false
	}
	fields := strings.Fields(string(data[i+1:]))
	const startTime = 22 - 3 // fields[0] is field 3, the state
	if len(fields) <= startTime {
		return "", false
	}
	return strconv.Itoa(pid) + "-" + fields[startTime], true
}

// ownerGone says whether the process a container's owner label names has ended. A label this
// package did not write reads as alive: never remove what may not be ours.
func ownerGone(owner string) bool {
	pid, _, ok := strings.Cut(owner, "-")
	if !ok {
		return false
	}
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 {
		return false
	}
	token, alive := processToken(n)
	return !alive || token != owner
}

// nodeRef is what removing a node container needs, from a Node or from the labels of an
// orphan's container.
type nodeRef struct {
	Container, Name, Bridge, Link, PodCIDR string
}

func (n *Node) ref() nodeRef {
	return nodeRef{Container: n.Container, Name: n.Name, Bridge: n.Bridge, Link: n.Link, PodCIDR: n.PodCIDR}
}

// labels are the docker run --label arguments of n's container.
func (n *Node) labels(dir string) []string {
	return []string{
		"--label", LabelNode + "=" + n.Name,
		"--label", labelOwner + "=" + ownerToken,
		"--label", labelNet + "=" + strings.Join([]string{n.Bridge, n.Link, n.PodCIDR}, ","),
		"--label", labelDir + "=" + dir,
	}
}

// removeContainer removes a node's container and what it left in the host's network namespace:
// its CNI bridge, the link of its node IP, the CNI firewall plugin's per-pod rules of pods that
// never got a CNI DEL, and the kubernetes Service's routing (Config.KubernetesService), tagged
// with the node's name. The container, which has NET_ADMIN there and the iptables the CNI
// plugins used, removes them while it still runs; the host's ip and iptables otherwise.
func removeContainer(r nodeRef) error {
	net := "ip link delete " + r.Bridge + " 2>/dev/null; ip link delete " + r.Link + " 2>/dev/null; " +
		"iptables -S CNI-FORWARD 2>/dev/null | grep -F -- ' " + strings.TrimSuffix(r.PodCIDR, "0/24") + "' | " +
		"sed 's/^-A/-D/' | while read -r r; do iptables $r; done; " +
		"for t in nat filter; do iptables -t $t -S 2>/dev/null | grep -F -- '--comment fairway-node-" + r.Name + " ' | " +
		"sed 's/^-A/-D/' | while read -r r; do iptables -t $t $r; done; done; true"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A wedged container must not keep its removal from running.
	netCtx, netCancel := context.WithTimeout(ctx, 15*time.Second)
	defer netCancel()
	// Without all three names (an orphan's label cut short) the rules' patterns would match
	// other nodes' rules: remove the container only.
	if r.Bridge != "" && r.Link != "" && strings.HasSuffix(r.PodCIDR, ".0/24") {
		if exec.CommandContext(netCtx, "docker", "exec", r.Container, "sh", "-c", net).Run() != nil {
			_ = exec.CommandContext(netCtx, "sh", "-c", net).Run()
		}
	}
	if out, err := exec.CommandContext(ctx, "docker", "rm", "-f", "-v", r.Container).CombinedOutput(); err != nil && !strings.Contains(string(out), "No such container") {
		return fmt.Errorf("removing %s: %w: %s", r.Container, err, bytes.TrimSpace(out))
	}
	return nil
}

// reapOrphans removes the node containers, host network state and directories of Starts whose
// process has ended without its Stop. It returns the containers it removed.
func reapOrphans(ctx context.Context, log logr.Logger) ([]string, error) {
	format := strings.Join([]string{"{{.Names}}", label(labelOwner), label(LabelNode), label(labelNet), label(labelDir)}, "\t")
	out, err := exec.CommandContext(ctx, "docker", "ps", "-a", "--filter", "label="+labelOwner, "--format", format).Output()
	if err != nil {
		return nil, fmt.Errorf("listing node containers: docker ps: %w", err)
	}
	var (
		removed []string
		errs    []error
		dirs    = map[string]bool{}
	)
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 5 || !ownerGone(f[1]) {
			continue
		}
		r := nodeRef{Container: f[0], Name: f[2]}
		if net := strings.Split(f[3], ","); len(net) == 3 {
			r.Bridge, r.Link, r.PodCIDR = net[0], net[1], net[2]
		}
		log.Info("removing a node container whose test process has ended", "container", r.Container, "owner", f[1])
		if err := removeContainer(r); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, r.Container)
		// Only a directory Start made (os.MkdirTemp("", "fwn-...")).
		if d := f[4]; filepath.Dir(d) == filepath.Clean(os.TempDir()) && strings.HasPrefix(filepath.Base(d), "fwn-") {
			dirs[d] = true
		}
	}
	for d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, fmt.Errorf("removing an orphan's directory: %w", err))
		}
	}
	return removed, errors.Join(errs...)
}

func label(key string) string { return `{{.Label "` + key + `"}}` }
