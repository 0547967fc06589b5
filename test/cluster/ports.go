package cluster

import (
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Ports for the test cluster's components are chosen below the kernel's ephemeral range and
// never handed out twice by one test process. A port picked by listening on port 0 and then
// released comes from that range: until the component binds it, the kernel may give it to
// another caller asking for port 0, or as the source port of an outgoing connection, and the
// e2e suite runs several clusters at once in one process, each making many connections (the
// component then exits with "address already in use", reported as an early exit).
var ports = struct {
	sync.Mutex
	handed map[int]bool
}{handed: map[int]bool{}}

// portFloor is the lowest port handed out: above the ports well-known services listen on.
const portFloor = 20000

// ephemeralLow is the start of the kernel's ephemeral port range (32768 where it cannot be
// read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > portFloor+1000 {
				return v
			}
		}
	}
	return 32768
}

// ephemeralLowOnce reads the range's start once per process: it does not change under a test.
var ephemeralLowOnce = sync.OnceValue(ephemeralLow)

// freePorts returns n distinct free TCP ports on 127.0.0.1 that this process has not handed out
// before. Another process may still take one before the component binds it, which the start-up
// wait reports as an early exit; none takes it as a source port or a port-0 listener.
func freePorts(n int) ([]int, error) {
	ports.Lock()
	defer ports.Unlock()
	high := ephemeralLowOnce()
	out := make([]int, 0, n)
	for tries := 0; len(out) < n; tries++ {
		if tries > 10000 {
			return nil, errors.New("finding a free port: none free below the ephemeral range")
		}
		p := portFloor + rand.IntN(high-portFloor)
		if ports.handed[p] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue // taken
		}
		l.Close()
		ports.handed[p] = true
		out = append(out, p)
	}
	return out, nil
}

// FreePorts returns n distinct free TCP ports on 127.0.0.1, for a process started with
// StartProcess that needs several (metrics and health probes).
func FreePorts(n int) ([]int, error) { return freePorts(n) }

// FreePort returns a free TCP port on 127.0.0.1, for processes started with StartProcess that
// need one (metrics, health probes, webhooks).
func FreePort() (int, error) {
	p, err := freePorts(1)
	if err != nil {
		return 0, err
	}
	return p[0], nil
}
