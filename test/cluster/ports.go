package cluster

import (
	"fmt"
	"net"
)

// freePorts returns n distinct free TCP ports on 127.0.0.1. All listeners are held until every
// port is chosen, so the ports differ from each other; another process may still take one before
// the component binds it, which the start-up wait reports as an early exit.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// FreePorts returns n distinct free TCP ports on 127.0.0.1, for a process started with
// StartProcess that needs several (metrics and health probes). Two FreePort calls in a row may
// return the same port: the kernel hands out a port just released again.
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
