package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"
)

// cliBinary is one binary whose `explain pvc` is measured (-cli LABEL=PATH).
type cliBinary struct{ label, path string }

// parseCLI parses -cli: comma-separated LABEL=PATH.
func parseCLI(s string) ([]cliBinary, error) {
	if s == "" {
		return nil, nil
	}
	var out []cliBinary
	for _, part := range strings.Split(s, ",") {
		label, path, ok := strings.Cut(part, "=")
		if !ok || label == "" || path == "" {
			return nil, fmt.Errorf("-cli %q: want LABEL=PATH[,LABEL=PATH...]", part)
		}
		out = append(out, cliBinary{label, path})
	}
	return out, nil
}

// cliResult is one binary's `explain pvc` of the fixture's pending claim, run as a user runs it
// (a fresh process reading the apiserver through the kubeconfig, no pvguard server named): the
// wall time and the process's peak RSS (getrusage's ru_maxrss of the child), per run.
type cliResult struct {
	Label       string    `json:"label"`
	Pairs       int       `json:"pairs"`
	WallSeconds []float64 `json:"wall_seconds"`
	MaxRSS      []uint64  `json:"max_rss_bytes"`
	// CPUSeconds is the process's user and system time: unlike the wall time, what the machine's
	// other load does not change much.
	CPUSeconds []float64 `json:"cpu_seconds"`
	// OutputBytes is the size of the JSON explanation printed; Stderr what it said besides.
	OutputBytes int    `json:"output_bytes"`
	Stderr      string `json:"stderr,omitempty"`
}

// measureCLI runs each binary's `explain pvc NAMESPACE/NAME -o json` runs times, one run at a
// time, alternating binaries so that the machine's load falls on each alike.
func measureCLI(ctx context.Context, bins []cliBinary, runs int, kubeconfig, claim string, pairs int, log io.Writer) ([]cliResult, error) {
	res := make([]cliResult, len(bins))
	for i, b := range bins {
		res[i] = cliResult{Label: b.label, Pairs: pairs}
	}
	for run := range runs {
		for i, b := range bins {
			cmd := exec.CommandContext(ctx, b.path, "explain", "pvc", claim, "-o", "json", "--kubeconfig", kubeconfig)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			start := time.Now()
			err := cmd.Run()
			wall := time.Since(start)
			if err != nil {
				return res, fmt.Errorf("%s explain pvc %s: %w\n%s", b.path, claim, err, stderr.String())
			}
			ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
			if !ok {
				return res, fmt.Errorf("no rusage for %s", b.path)
			}
			r := &res[i]
			r.WallSeconds = append(r.WallSeconds, wall.Seconds())
			r.MaxRSS = append(r.MaxRSS, uint64(ru.Maxrss)*1024) // ru_maxrss is in KiB on Linux
			cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
			r.CPUSeconds = append(r.CPUSeconds, cpu.Seconds())
			r.OutputBytes, r.Stderr = stdout.Len(), strings.TrimSpace(stderr.String())
			fmt.Fprintf(log, "explain pvc (%s) run %d: %.2f s, CPU %.2f s, max RSS %s, %d bytes\n", b.label, run+1, wall.Seconds(), cpu.Seconds(), mib(r.MaxRSS[len(r.MaxRSS)-1]), stdout.Len())
		}
	}
	return res, nil
}

// writeCLIReport prints one markdown row per size and binary: the median and range of the runs.
func writeCLIReport(w io.Writer, rs []cliResult) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| pairs | `explain pvc` binary | wall: median (min-max) | CPU (user+system): median | peak RSS: median (min-max) | JSON printed |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, r := range rs {
		if len(r.WallSeconds) == 0 {
			continue
		}
		wall, cpu, rss := slices.Clone(r.WallSeconds), slices.Clone(r.CPUSeconds), slices.Clone(r.MaxRSS)
		slices.Sort(wall)
		slices.Sort(cpu)
		slices.Sort(rss)
		fmt.Fprintf(w, "| %d | %s | %.2f s (%.2f-%.2f) | %.2f s | %s (%s-%s) | %d KB |\n", r.Pairs, r.Label,
			wall[len(wall)/2], wall[0], wall[len(wall)-1], cpu[len(cpu)/2], mib(rss[len(rss)/2]), mib(rss[0]), mib(rss[len(rss)-1]), r.OutputBytes/1000)
	}
}
