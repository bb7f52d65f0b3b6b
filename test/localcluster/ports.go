package localcluster

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// pickPorts returns n distinct free loopback ports. They lie below the
// kernel's ephemeral range, so an outgoing connection cannot be holding one
// by the time the component binds it, and are random rather than
// sequential, so clusters started at the same moment are unlikely to collide.
func pickPorts(n int) ([]int, error) {
	lo, hi := 20000, 32767
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			if eph, err := strconv.Atoi(f[0]); err == nil && eph > lo+1000 {
				hi = eph - 1
			}
		}
	}
	var picked []int
	seen := map[int]bool{}
	for tries := 0; len(picked) < n; tries++ {
		if tries >= 1000 {
			return nil, fmt.Errorf("found no free loopback ports in %d-%d", lo, hi)
		}
		p := lo + rand.IntN(hi-lo+1)
		if seen[p] || !portFree(p) {
			continue
		}
		seen[p] = true
		picked = append(picked, p)
	}
	return picked, nil
}

// portFree: nothing answers on the port (a listener on 0.0.0.0 counts too)
// and it can be bound. Only for picking ports: the bind would take the
// port from a component starting meanwhile (see listening).
func portFree(p int) bool {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		_ = c.Close()
		return false
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// listening: something accepts connections on the loopback port. It only
// dials: a component that has not bound its port yet must find it free.
func listening(port string) bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", port), time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}
