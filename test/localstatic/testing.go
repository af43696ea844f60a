package localstatic

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
)

// PassErrors collects the failed passes a test's stand-in reports (Config.OnError).
type PassErrors struct {
	mu   sync.Mutex
	errs []string
}

// Take returns the failed passes so far, "node: error" each.
func (p *PassErrors) Take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.errs...)
}

func (p *PassErrors) add(node string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errs = append(p.errs, node+": "+err.Error())
}

// StartForTest starts the stand-in for a test: its failed passes are collected in the returned
// PassErrors (cfg.OnError is replaced), and it is stopped, and waited for, when the test ends.
// A test that must stop it earlier (before its own cleanup deletes the volumes the stand-in
// would find again) registers that cleanup before calling this: cleanups run last first.
func StartForTest(t testing.TB, ctx context.Context, cs kubernetes.Interface, cfg Config) (*Provisioner, *PassErrors) {
	t.Helper()
	errs := &PassErrors{}
	cfg.OnError = errs.add
	runCtx, stop := context.WithCancel(ctx)
	p, err := Start(runCtx, cs, cfg)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop()
		select {
		case <-p.Done():
		case <-time.After(30 * time.Second):
			t.Error("the local static provisioner stand-in did not stop within 30s of its context ending")
		}
	})
	return p, errs
}

// MountTmpfs mounts a 1 MiB tmpfs on dir until the test ends: the stand-in, like the local static
// provisioner, takes only mount points as volumes, so a plain directory is nothing to fall back
// to. It needs root (CAP_SYS_ADMIN).
func MountTmpfs(t testing.TB, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1M", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mounting a tmpfs on %s failed (%v: %s): this test needs root with permission to mount (CAP_SYS_ADMIN), since the local static provisioner only takes mount points as volumes", dir, err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("unmounting %s: %v: %s", dir, err, strings.TrimSpace(string(out)))
		}
	})
}
