package localcluster

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// hostPaths are what the real node's parts create on the host, outside DIR:
// recorded at Up when absent, removed at Down.
var hostPaths = []string{"/var/lib/kubelet", "/var/log/containers", "/run/containerd", "/var/lib/cni", "/run/netns"}

// pickBridge chooses the first 10.244.N.0/24 (N 1..250) no interface uses.
func pickBridge(st *State) error {
	ifaces, _ := net.Interfaces()
	used := map[int]bool{}
	for _, i := range ifaces {
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if ip, _, err := net.ParseCIDR(a.String()); err == nil {
				if v4 := ip.To4(); v4 != nil && v4[0] == 10 && v4[1] == 244 {
					used[int(v4[2])] = true
				}
			}
		}
	}
	for n := 1; n <= 250; n++ {
		if _, err := net.InterfaceByName(fmt.Sprintf("taskops%d", n)); used[n] || err == nil {
			continue
		}
		st.BridgeName, st.BridgeIP = fmt.Sprintf("taskops%d", n), fmt.Sprintf("10.244.%d.1", n)
		st.PodSubnet, st.CgroupRoot = fmt.Sprintf("10.244.%d.0/24", n), fmt.Sprintf("/taskops%d", n)
		return nil
	}
	return errors.New("no free 10.244.N.0/24 for the pod bridge")
}

// makeBridge adds the pods' bridge, with no route out. Its MAC address is
// fixed (locally administered): a bridge without one takes the lowest MAC of
// its ports and changes it whenever a pod's veth comes or goes, and a running
// pod whose ARP entry still names the old address then loses its packets to
// the host until the entry expires (a notification pod's second try hung
// while other pods ended).
func (c *Cluster) makeBridge(st State) error {
	var n int
	if _, err := fmt.Sscanf(st.BridgeIP, "10.244.%d.1", &n); err != nil {
		return fmt.Errorf("bridge address %s: %w", st.BridgeIP, err)
	}
	if err := run("ip", "link", "add", st.BridgeName, "address", fmt.Sprintf("02:00:0a:f4:%02x:01", n), "type", "bridge"); err != nil {
		return fmt.Errorf("could not create bridge %s: %w", st.BridgeName, err)
	}
	if err := run("ip", "addr", "add", st.BridgeIP+"/24", "dev", st.BridgeName); err != nil {
		return err
	}
	if err := run("ip", "link", "set", st.BridgeName, "up"); err != nil {
		return err
	}
	fwd, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	c.logf("bridge %s %s/24 (no route out, forwarding untouched: %s)", st.BridgeName, st.BridgeIP, strings.TrimSpace(string(fwd)))
	return nil
}

// otherRealNodes are the DIRs of other local clusters whose real node runs.
func (c *Cluster) otherRealNodes() []string {
	var out []string
	for _, args := range processes() {
		if len(args) < 3 || filepath.Base(args[0]) != "containerd" || args[1] != "--config" {
			continue
		}
		d, ok := strings.CutSuffix(args[2], "/node/containerd/config.toml")
		if !ok || d == c.Dir {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "node", "host-paths")); err == nil {
			out = append(out, d)
		}
	}
	sort.Strings(out)
	return out
}

// recordHostPaths writes node/host-paths: which hostPaths did not exist
// before any of our real nodes ran (inherited from a node still running,
// which created them).
func (c *Cluster) recordHostPaths() error {
	file := c.path("node", "host-paths")
	if other := c.otherRealNodes(); len(other) > 0 {
		b, err := os.ReadFile(filepath.Join(other[0], "node", "host-paths"))
		if err != nil {
			return err
		}
		return os.WriteFile(file, b, 0o644)
	}
	var absent []string
	for _, p := range hostPaths {
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			absent = append(absent, p+"\n")
		}
	}
	return os.WriteFile(file, []byte(strings.Join(absent, "")), 0o644)
}

// cgroupDirs is the node's cgroupRoot in every hierarchy.
func cgroupDirs(root string) []string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return []string{"/sys/fs/cgroup" + root}
	}
	var out []string
	hier, _ := filepath.Glob("/sys/fs/cgroup/*/cgroup.procs")
	for _, h := range hier {
		out = append(out, filepath.Dir(h)+root)
	}
	return out
}

func makeCgroups(root string) error {
	for _, d := range cgroupDirs(root) {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		// A new cgroup-v1 cpuset starts empty, and no task can join it then.
		if _, err := os.Stat(filepath.Join(d, "cpuset.cpus")); err == nil {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, err := os.ReadFile(filepath.Join(filepath.Dir(d), f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(d, f), b, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// removeCgroups removes the node's cgroups, deepest first; one with
// processes left in it stays (and is reported).
func (c *Cluster) removeCgroups(root string) {
	for _, d := range cgroupDirs(root) {
		var dirs []string
		_ = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := os.Remove(dirs[i]); err != nil {
				c.logf("warning: cgroup %s is still in use", dirs[i])
			}
		}
	}
}

// unmountUnder detaches every mount point at or below dir, deepest first.
func (c *Cluster) unmountUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			points = append(points, f[4])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(points)))
	for _, m := range points {
		if err := run("umount", "-l", m); err != nil {
			c.problem("could not unmount %s", m)
		}
	}
}

// removePath removes a path Down owns. A pod's network namespace file under
// /run/netns is a bind mount and can be busy for a moment after its pod
// went: detach what is mounted below the path (lazily), then retry.
func (c *Cluster) removePath(p string) {
	var err error
	for try := 0; try < 5; try++ {
		c.unmountUnder(p)
		if err = os.RemoveAll(p); err == nil {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	c.problem("could not remove %s: %v", p, err)
}

// run runs a host command, its output in the error.
func run(name string, args ...string) error {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
