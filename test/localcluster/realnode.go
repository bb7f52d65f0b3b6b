package localcluster

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"
)

// The real node: containerd + runc + a kubelet built from the pinned
// Kubernetes module, so pods run real containers. In short (the facts
// behind each setting are in docs/local-cluster.md, "The real node"):
//
//   - Nothing leaves the machine: pods sit on a bridge of their own
//     (taskops<N>, 10.244.<N>.0/24) with no default route, no masquerading
//     and IP forwarding untouched, and a resolv.conf naming a loopback
//     resolver. The API server and the kubelet serve on the bridge address,
//     so pods reach the API server without kube-proxy.
//   - The host stays as it was: the kubelet runs in its own mount namespace,
//     where the sysctls it would write are files bound over /proc/sys; it
//     adds no iptables chains; its pods live under a cgroup of their own
//     (cgroupRoot /taskops<N>); containerd's root, state, runc root and
//     socket, the CNI config and IPAM data, the kubelet's root and logs are
//     all under DIR. What they still create on the host (hostPaths) is
//     recorded at Up when absent and removed at Down.
//   - Images cannot be pulled: the pause, busybox and operator images are
//     built from files (hack/image) and imported with `ctr images import`.
const (
	realNodeName = "real-node-0"
	pauseImage   = "registry.k8s.io/pause:3.10"
	busyboxImage = "docker.io/library/busybox:1.37"
)

// realNodeUnavailable says why this machine cannot run the real node; ""
// when it can.
func realNodeUnavailable() string {
	if runtime.GOOS != "linux" {
		return "not Linux"
	}
	if os.Geteuid() != 0 {
		return "not root (the kubelet and containerd need root)"
	}
	for _, c := range []string{"containerd", "runc", "ctr", "unshare", "mount", "ip", "gcc"} {
		if _, err := exec.LookPath(c); err != nil {
			return "no " + c + " (hack/real-node-deps.sh installs it)"
		}
	}
	for _, p := range []string{"/usr/lib/cni/bridge", "/usr/lib/cni/host-local"} {
		if fi, err := os.Stat(p); err != nil || fi.Mode()&0o111 == 0 {
			return "no CNI plugins in /usr/lib/cni (containernetworking-plugins)"
		}
	}
	if _, err := os.Stat("/bin/busybox"); err != nil {
		return "no /bin/busybox (busybox-static)"
	}
	if _, err := os.Stat("/sys/fs/cgroup"); err != nil {
		return "no /sys/fs/cgroup"
	}
	return ""
}

// prepareRealNode is everything before containerd starts.
func (c *Cluster) prepareRealNode(st State) error {
	nd := c.path("node")
	// What a crashed run left mounted must not be removed through its mounts.
	c.unmountUnder(nd)
	if err := os.RemoveAll(nd); err != nil {
		return err
	}
	if err := os.MkdirAll(nd, 0o755); err != nil {
		return err
	}
	if err := c.recordHostPaths(); err != nil {
		return err
	}
	if err := c.makeBridge(st); err != nil {
		return err
	}
	if err := c.writeNodeConfig(st); err != nil {
		return err
	}
	if err := makeCgroups(st.CgroupRoot); err != nil {
		return err
	}
	// The kubelet's root dir as a shared mount: see startKubelet.
	root := filepath.Join(nd, "kubelet", "root")
	if err := run("mount", "--bind", root, root); err != nil {
		return err
	}
	return run("mount", "--make-rshared", root)
}

// startRealNode starts containerd, imports the images, starts the kubelet.
func (c *Cluster) startRealNode(ctx context.Context, st State) error {
	if err := c.start("containerd", nil, "containerd", "--config", c.path("node", "containerd", "config.toml")); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "containerd", func(context.Context) bool { return c.ctr("version") == nil }); err != nil {
		return err
	}
	images, err := c.nodeImages()
	if err != nil {
		return err
	}
	if err := c.importImages(images...); err != nil {
		return err
	}
	return c.startKubelet(st)
}

// startKubelet runs the kubelet in its own mount namespace: volumes it
// mounts under its root dir must still reach containerd, so that dir is a
// shared mount (made so once, in prepareRealNode) and the namespace keeps
// propagation unchanged; /proc is made private first, so the sysctl files
// bound over it stay inside.
func (c *Cluster) startKubelet(st State) error {
	nd := c.path("node")
	var sysctls []string
	for k := range kubeletSysctls {
		sysctls = append(sysctls, k)
	}
	sort.Strings(sysctls)
	script := `set -e
nd=$1; shift
mount --make-rprivate /proc
for s in ` + strings.Join(sysctls, " ") + `; do mount --bind "$nd/kubelet/sysctl/$s" "/proc/sys/$s"; done
exec "$@"`
	return c.start("kubelet", nil, "unshare", "--mount", "--propagation", "unchanged", "--",
		"sh", "-c", script, "kubelet-ns", nd,
		filepath.Join(st.BinDir, "kubelet"),
		"--config="+filepath.Join(nd, "kubelet", "config.yaml"),
		"--kubeconfig="+c.path("pki", "kubelet.kubeconfig"),
		"--root-dir="+filepath.Join(nd, "kubelet", "root"),
		"--cert-dir="+filepath.Join(nd, "kubelet", "pki"),
		"--node-ip="+st.BridgeIP,
		"--hostname-override="+realNodeName,
		"--node-labels=type=real")
}

// downRealNode stops the kubelet, its pods, containerd, then removes what
// they left on the host. Safe to run when parts never started.
func (c *Cluster) downRealNode(st State) {
	nd := c.path("node")
	if _, err := os.Stat(nd); err != nil {
		return
	}
	c.stop("kubelet")
	crictl := filepath.Join(st.BinDir, "crictl")
	if _, err := os.Stat(crictl); err == nil && st.BinDir != "" && c.pidOf("containerd") != 0 {
		// Through the CRI, so containerd's CRI store stays consistent
		// (removing its containers with ctr corrupts it).
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		err := exec.CommandContext(ctx, crictl, "--runtime-endpoint", "unix://"+filepath.Join(nd, "containerd", "containerd.sock"), "rmp", "-a", "-f").Run()
		cancel()
		if err != nil {
			c.logf("warning: crictl rmp -a -f failed: %v", err)
		}
	}
	c.stop("containerd")
	// Shims outlive containerd by design; ours name our socket.
	for pid, args := range processes() {
		if strings.Contains(strings.Join(args, " "), "-address "+filepath.Join(nd, "containerd", "containerd.sock")) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	c.unmountUnder(nd)
	if st.CgroupRoot != "" {
		c.removeCgroups(st.CgroupRoot)
	}
	if st.BridgeName != "" && run("ip", "link", "show", st.BridgeName) == nil {
		if err := run("ip", "link", "del", st.BridgeName); err != nil {
			c.problem("could not delete bridge %s: %v", st.BridgeName, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(nd, "host-paths")); err == nil {
		if other := c.otherRealNodes(); len(other) > 0 {
			// Still in use by another real node: it removes them when it goes.
			_ = os.WriteFile(filepath.Join(other[0], "node", "host-paths"), b, 0o644)
		} else {
			for _, p := range strings.Fields(string(b)) {
				c.removePath(p)
			}
		}
	}
	c.removePath(nd)
}

// nodeImages builds (or reuses) the pause and busybox image archives in
// bin/images.
func (c *Cluster) nodeImages() ([]string, error) {
	out := filepath.Join(c.Root, "bin", "images")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	pauseTar, busyboxTar := filepath.Join(out, "pause.tar"), filepath.Join(out, "busybox.tar")
	if !nonEmpty(pauseTar) {
		mod := exec.Command("go", "mod", "download", "-json", "k8s.io/kubernetes")
		mod.Dir = filepath.Join(c.Root, "hack", "k8s")
		b, err := mod.Output()
		if err != nil {
			return nil, fmt.Errorf("go mod download k8s.io/kubernetes: %w", err)
		}
		var m struct{ Dir string }
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, err
		}
		src := filepath.Join(m.Dir, "build", "pause", "linux", "pause.c")
		if err := run("gcc", "-Os", "-static", "-DVERSION=3.10", "-o", filepath.Join(out, "pause"), src); err != nil {
			return nil, fmt.Errorf("could not compile pause.c (gcc, libc6-dev): %w", err)
		}
		if err := c.goRun("./hack/image", "pause", "-pause", filepath.Join(out, "pause"), "-tag", pauseImage, "-out", pauseTar); err != nil {
			return nil, err
		}
	}
	if !nonEmpty(busyboxTar) {
		if err := c.goRun("./hack/image", "busybox", "-busybox", "/bin/busybox", "-tag", busyboxImage, "-out", busyboxTar); err != nil {
			return nil, err
		}
	}
	return []string{pauseTar, busyboxTar}, nil
}

func (c *Cluster) goRun(pkg string, args ...string) error {
	cmd := exec.Command("go", append([]string{"run", pkg}, args...)...)
	cmd.Dir = c.Root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go run %s: %w\n%s", pkg, err, out)
	}
	return nil
}

func nonEmpty(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Size() > 0
}

// ctr runs containerd's client against the node's containerd, in the
// namespace the CRI uses.
func (c *Cluster) ctr(args ...string) error {
	return run("ctr", append([]string{"--address", c.path("node", "containerd", "containerd.sock"), "--namespace", "k8s.io"}, args...)...)
}

// importImages imports OCI image archives into the node's containerd.
func (c *Cluster) importImages(archives ...string) error {
	for _, f := range archives {
		if !nonEmpty(f) {
			return fmt.Errorf("no image archive %s", f)
		}
		if err := c.ctr("images", "import", "--no-unpack=false", f); err != nil {
			return err
		}
		c.logf("loaded image %s from %s", imageName(f), f)
	}
	return nil
}

// imageName is the name an OCI archive's index gives its image.
func imageName(archive string) string {
	f, err := os.Open(archive)
	if err != nil {
		return "?"
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			return "?"
		}
		if h.Name != "index.json" {
			continue
		}
		var idx struct {
			Manifests []struct{ Annotations map[string]string } `json:"manifests"`
		}
		if err := json.NewDecoder(io.LimitReader(tr, 1<<20)).Decode(&idx); err != nil || len(idx.Manifests) == 0 {
			return "?"
		}
		return idx.Manifests[0].Annotations["io.containerd.image.name"]
	}
}

var errNoRealNode = errors.New("this cluster has no real node")
