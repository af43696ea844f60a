package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// upstreamResult is what the size's objects cost the apiserver's lists alone, and what they cost
// kube-controller-manager running only the persistentvolume-binder-controller (the binder
// pvguard's replaces), measured against the same apiserver before pvguard's runs.
type upstreamResult struct {
	// ListSeconds: every volume and every claim listed at once, as informers first list them
	// (resourceVersion 0, from the apiserver's watch cache), JSON and protobuf gzip-compressed
	// (client-go's default), and protobuf uncompressed (as kube-controller-manager and pvguard
	// ask for them).
	ListJSONSeconds          float64 `json:"list_json_seconds"`
	ListProtobufSeconds      float64 `json:"list_protobuf_seconds"`
	ListProtobufPlainSeconds float64 `json:"list_protobuf_plain_seconds"`
	// ListErrors are the lists that failed (their seconds are then 0): a whole list of a large
	// cluster on a busy machine can outlast the apiserver's request timeout, and the lists are
	// an anchor beside the controller's run, not a step before it.
	ListErrors []string `json:"list_errors,omitempty"`
	// SyncedSeconds: process start -> its informers' "Caches are synced" (the log at --v=2; the
	// only controller running is the binder); it binds from then on.
	SyncedSeconds float64 `json:"synced_seconds"`
	// Peak RSS over its whole run (start, sync, its first sync of every claim and volume, and the
	// periodic syncs within -upstream); Steady at the end.
	PeakRSS   uint64 `json:"peak_rss"`
	SteadyRSS uint64 `json:"steady_rss"`
	// Seconds the controller ran.
	RanSeconds float64 `json:"ran_seconds"`
}

// timeLists lists every volume and claim at once with the content type given, compressed or not.
func timeLists(ctx context.Context, cfg *rest.Config, contentType string, compressed bool) (float64, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.DisableCompression = !compressed
	cfg.ContentType = contentType
	cfg.AcceptContentTypes = contentType
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return 0, fmt.Errorf("creating the list client: %w", err)
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Go(func() {
		_, errs[0] = cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	})
	wg.Go(func() {
		_, errs[1] = cs.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	})
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, fmt.Errorf("listing volumes and claims (%s): %w", contentType, err)
	}
	return time.Since(start).Seconds(), nil
}

// measureUpstream times the lists, then runs kube-controller-manager with only the PV binder
// (the flags hack/bench/binder uses, at its default client rates) for run after it has synced
// (35 s covers two of its 15 s periodic syncs), sampling its RSS every 100 ms.
func measureUpstream(ctx context.Context, assets, dir, kubeconfig string, cfg *rest.Config, run time.Duration) (upstreamResult, error) {
	var r upstreamResult
	for _, l := range []struct {
		seconds     *float64
		contentType string
		compressed  bool
	}{
		{&r.ListJSONSeconds, "application/json", true},
		{&r.ListProtobufSeconds, "application/vnd.kubernetes.protobuf", true},
		{&r.ListProtobufPlainSeconds, "application/vnd.kubernetes.protobuf", false},
	} {
		var err error
		if *l.seconds, err = timeLists(ctx, cfg, l.contentType, l.compressed); err != nil {
			if ctx.Err() != nil {
				return r, err
			}
			r.ListErrors = append(r.ListErrors, err.Error())
			fmt.Fprintf(os.Stderr, "upstream: %v (not timed; going on)\n", err)
		}
	}
	logPath := filepath.Join(dir, "kube-controller-manager.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return r, fmt.Errorf("creating the controller manager's log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(filepath.Join(assets, "kube-controller-manager"),
		"--kubeconfig="+kubeconfig,
		"--controllers=persistentvolume-binder-controller",
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--secure-port=0",
		"--v=2",
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return r, fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	proc, err := procfs.NewProc(cmd.Process.Pid)
	if err != nil {
		return r, fmt.Errorf("reading kube-controller-manager's /proc: %w", err)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var syncedAt time.Time
	for {
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case err := <-exited:
			return r, fmt.Errorf("kube-controller-manager exited (%v); see %s", err, logPath)
		case <-tick.C:
		}
		if st, err := proc.NewStatus(); err == nil {
			r.PeakRSS = max(r.PeakRSS, st.VmRSS)
			r.SteadyRSS = st.VmRSS
		}
		if syncedAt.IsZero() && logSays(logPath, "Caches are synced") {
			syncedAt = time.Now()
			r.SyncedSeconds = syncedAt.Sub(start).Seconds()
		}
		if !syncedAt.IsZero() && time.Since(syncedAt) >= run {
			r.RanSeconds = time.Since(start).Seconds()
			return r, nil
		}
		if syncedAt.IsZero() && time.Since(start) > 10*time.Minute {
			return r, fmt.Errorf("kube-controller-manager not synced after 10 minutes; see %s", logPath)
		}
	}
}

// logSays reports whether a line of the log holds every one of the strings.
func logSays(path string, parts ...string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}
