// Command policytest measures `pvguard test` at scale: it generates a suite of -cases write cases
// over -objects fixture objects (test/gen.Inventory's cluster, written as one `kubectl get -o
// json` List), then times reading the suite (policytest.Load: the suite, the fixtures, every case
// checked and resolved), running it (policytest.Run: each write through pvguard's mutating and
// validating webhook handlers), and `pvguard test DIR` as a whole (cli.RunTest). Anchors: the
// same writes' admission reviews sent straight to webhook.Validator.Handle over the same view
// (no suite around them), and `pvguard audit -f` of the same fixture file. See
// docs/benchmarks.md, "Policy test suites".
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/internal/policytest"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/gen"
	"github.com/pvguard/pvguard/webhook"
)

func main() {
	cases := flag.Int("cases", 10000, "write cases in the suite")
	objects := flag.Int("objects", 100000, "fixture objects (half volumes, half claims, plus 3 classes and 32 nodes)")
	runs := flag.Int("runs", 3, "measurements of each kind: the median is shown, and every run")
	keep := flag.String("dir", "", "write the suite here (kept) instead of a temporary directory")
	profile := flag.String("cpuprofile", "", "write a CPU profile of the runs to this file")
	flag.Parse()

	dir := *keep
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "pvguard-policytest-bench-"); err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(dir)
	}
	start := time.Now()
	n, err := generate(dir, *objects, *cases)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("suite: %d write cases over %d fixture objects in %s (generated in %s)\n", *cases, n, dir, time.Since(start).Round(time.Millisecond))
	fmt.Printf("GOMAXPROCS %d, %s\n\n", runtime.GOMAXPROCS(0), runtime.Version())

	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	var load, run, whole, direct, audit []time.Duration
	var peakLoadRun uint64
	for r := range *runs {
		runtime.GC()
		stop := sampleHeap()
		t0 := time.Now()
		suites, errs := policytest.Load([]string{dir})
		if len(errs) > 0 {
			log.Fatal(errs)
		}
		t1 := time.Now()
		rep := policytest.Run(context.Background(), suites, policytest.Options{})
		t2 := time.Now()
		peak := stop()
		peakLoadRun = max(peakLoadRun, peak)
		if rep.Failed > 0 || rep.Cases != *cases {
			for _, s := range rep.Suites {
				for _, c := range s.Cases {
					if !c.Passed {
						log.Fatalf("%d of %d cases failed, the first: %s: %s", rep.Failed, rep.Cases, c.Name, c.Failure)
					}
				}
			}
			log.Fatalf("%d cases ran, want %d", rep.Cases, *cases)
		}
		load, run = append(load, t1.Sub(t0)), append(run, t2.Sub(t1))
		d := reviewDirect(suites[0])
		direct = append(direct, d)

		runtime.GC()
		t3 := time.Now()
		err := cli.RunTest(context.Background(), cli.TestFlags{Paths: []string{dir}, Output: "text"}, io.Discard, os.Stderr)
		if err != nil {
			log.Fatal(err)
		}
		whole = append(whole, time.Since(t3))

		runtime.GC()
		t4 := time.Now()
		err = cli.RunAudit(cli.AuditFlags{Files: []string{filepath.Join(dir, "fixtures.json")}, Output: "json",
			Now: func() time.Time { return gen.InventoryNow }}, io.Discard, io.Discard)
		if err != nil {
			log.Fatal(err)
		}
		audit = append(audit, time.Since(t4))
		fmt.Printf("run %d: load %s, run %s (peak heap %d MiB), pvguard test %s; anchors: %d reviews to Validator.Handle %s, pvguard audit -f %s\n",
			r+1, ms(load[r]), ms(run[r]), peak>>20, ms(whole[r]), *cases, ms(d), ms(audit[r]))
	}
	fmt.Println()
	fmt.Printf("median of %d: pvguard test %s (load %s, run %s: %.0f cases/s); peak heap %d MiB\n",
		*runs, ms(median(whole)), ms(median(load)), ms(median(run)), float64(*cases)/median(run).Seconds(), peakLoadRun>>20)
	fmt.Printf("anchors: the same %d reviews straight to Validator.Handle %s (%.0f reviews/s); pvguard audit -f of the fixtures %s\n",
		*cases, ms(median(direct)), float64(*cases)/median(direct).Seconds(), ms(median(audit)))
}

// reviewDirect sends each case's admission review, as the suite resolved it, straight to the
// validating handler of its kind, on every core, over a view of the same fixtures: the cost of
// the reviews without the suite around them.
func reviewDirect(s *policytest.Suite) time.Duration {
	f := s.Fixtures
	view := clusterstate.New(f.Claims, f.Volumes, f.Classes, f.Nodes)
	engines := webhook.StaticEngine{E: policy.NewEngine(nil)}
	validators := map[policy.Kind]*webhook.Validator{}
	for _, k := range []policy.Kind{policy.KindPersistentVolume, policy.KindPersistentVolumeClaim, policy.KindStorageClass} {
		validators[k] = webhook.NewValidator(k, engines, webhook.StaticView{V: view}, nil)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(s.Cases) {
					return
				}
				w := s.Cases[i].Write
				validators[w.Kind].Handle(context.Background(), w.Request(w.Object))
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// sampleHeap samples the live heap every 10 ms until the returned function is called, which
// returns the largest sample.
func sampleHeap() func() uint64 {
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > peak.Load() {
				peak.Store(m.HeapAlloc)
			}
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak.Load()
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d.Microseconds())/1000) }

// generate writes fixtures.json (test/gen.Inventory's cluster of n objects, one List) and suite.json: cases
// write cases spread over the cluster's healthy bound pairs, five kinds in turn, each with the
// answer a default install gives it. It returns the number of fixture objects.
func generate(dir string, n, cases int) (int, error) {
	st := gen.Inventory(n)
	files, err := gen.WriteJSON(st, dir, 1<<30)
	if err != nil {
		return 0, err
	}
	if err := os.Rename(files[0], filepath.Join(dir, "fixtures.json")); err != nil {
		return 0, err
	}
	// Healthy pairs: gen.Inventory puts a violation in the first slots of every 20 pairs.
	var healthy []int
	for i := range st.Volumes() {
		if i%20 >= 5 {
			healthy = append(healthy, i)
		}
	}
	if len(healthy) < 2 {
		return 0, fmt.Errorf("%d objects hold too few pairs", n)
	}
	type obj = map[string]any
	admin := obj{"user": "kubernetes-admin", "groups": []string{"system:masters"}}
	with := func(base obj, more obj) obj {
		out := obj{}
		for k, v := range base {
			out[k] = v
		}
		for k, v := range more {
			out[k] = v
		}
		return out
	}
	var list []obj
	for c := range cases {
		i := healthy[(c*7919)%len(healthy)]
		pv, pvc := st.Volumes()[i], st.Claims()[i]
		claimRef := "PersistentVolumeClaim/" + pvc.Namespace + "/" + pvc.Name
		local := pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimRetain
		var kase obj
		switch c % 5 {
		case 0: // a tenant labels its claim: admitted
			kase = obj{"write": obj{"operation": "UPDATE", "user": "alice", "groups": []string{"team"}, "oldFixture": claimRef,
				"patch": obj{"metadata": obj{"labels": obj{"bench.pvguard.io/case": fmt.Sprint(c)}}}},
				"expect": obj{"allowed": true}}
		case 1: // the bound volume re-pointed at another pair's claim of its kind: refused
			j := healthy[(c*104729+1)%len(healthy)]
			for j == i || (st.Volumes()[j].Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimRetain) != local {
				j = healthy[(slices.Index(healthy, j)+1)%len(healthy)]
			}
			other := st.Claims()[j]
			kase = obj{"write": with(admin, obj{"operation": "UPDATE", "oldFixture": "PersistentVolume/" + pv.Name,
				"patch": obj{"spec": obj{"claimRef": obj{"namespace": other.Namespace, "name": other.Name, "uid": string(other.UID)}}}}),
				"expect": obj{"denied": []string{"PVG002", "PVG004"}}}
		case 2: // a copy of the claim naming its volume: refused
			kase = obj{"write": obj{"operation": "CREATE", "user": "alice", "groups": []string{"team"},
				"object": obj{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
					"metadata": obj{"namespace": pvc.Namespace, "name": pvc.Name + "-copy"},
					"spec": obj{"accessModes": pvc.Spec.AccessModes, "storageClassName": *pvc.Spec.StorageClassName,
						"resources": obj{"requests": obj{"storage": pvc.Spec.Resources.Requests.Storage().String()}}, "volumeName": pv.Name}}},
				"expect": obj{"denied": []string{"PVG004"}}}
		case 3: // a tenant strips its bound claim's finalizer: refused
			kase = obj{"write": obj{"operation": "UPDATE", "user": "alice", "groups": []string{"team"}, "oldFixture": claimRef,
				"patch": obj{"metadata": obj{"finalizers": nil}}},
				"expect": obj{"denied": []string{"PVG012"}}}
		case 4: // the reclaim policy changed: Retain -> Delete refused, Delete -> Retain admitted
			to, expect := "Retain", obj{"allowed": true}
			if local {
				to, expect = "Delete", obj{"denied": []string{"PVG011"}}
			}
			kase = obj{"write": with(admin, obj{"operation": "UPDATE", "oldFixture": "PersistentVolume/" + pv.Name,
				"patch": obj{"spec": obj{"persistentVolumeReclaimPolicy": to}}}), "expect": expect}
		}
		kase["name"] = fmt.Sprintf("case %05d", c)
		list = append(list, kase)
	}
	suite := obj{"apiVersion": policytest.APIVersion, "kind": policytest.Kind, "metadata": obj{"name": "bench"},
		"fixtures": obj{"files": []string{"fixtures.json"}}, "cases": list}
	data, err := json.Marshal(suite)
	if err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(dir, "suite.json"), data, 0o644); err != nil {
		return 0, err
	}
	return len(st.Volumes()) + len(st.Claims()) + len(st.Classes()) + len(st.Nodes()), nil
}
