package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/pvguard/pvguard/policy"
)

// loadTyped is a prototype of a faster app.LoadManifests, measured as "-child typed" to size the
// fix proposed in docs/benchmarks.md; pvguard does not use it. It differs from LoadManifests in
// two ways: each document goes from YAML to JSON once and from JSON straight into the typed
// object (no map[string]any and no unstructured conversion), and files are decoded on
// GOMAXPROCS workers, then joined in walk order. Error reporting is simplified.
func loadTyped(paths []string) (*policy.Snapshot, int, error) {
	var files []string
	for _, root := range paths {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			switch strings.ToLower(filepath.Ext(path)) {
			case ".yaml", ".yml", ".json":
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			return nil, 0, err
		}
	}
	parts := make([]policy.Snapshot, len(files))
	errs := make([]error, len(files))
	next := make(chan int)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := range next {
				errs[i] = loadFileTyped(files[i], &parts[i])
			}
		})
	}
	for i := range files {
		next <- i
	}
	close(next)
	wg.Wait()
	snap := &policy.Snapshot{}
	objects := 0
	for i := range parts {
		snap.PVs = append(snap.PVs, parts[i].PVs...)
		snap.PVCs = append(snap.PVCs, parts[i].PVCs...)
		snap.Nodes = append(snap.Nodes, parts[i].Nodes...)
		snap.Classes = append(snap.Classes, parts[i].Classes...)
		objects += len(parts[i].PVs) + len(parts[i].PVCs) + len(parts[i].Nodes) + len(parts[i].Classes)
	}
	return snap, objects, errors.Join(errs...)
}

func loadFileTyped(path string, snap *policy.Snapshot) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	if head, _ := br.Peek(512); bytes.HasPrefix(bytes.TrimSpace(head), []byte("{")) {
		// JSON needs no YAML parser; one value per file, as kubectl writes it.
		data, err := io.ReadAll(br)
		if err != nil {
			return err
		}
		if err := addTyped(snap, data); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return nil
	}
	r := utilyaml.NewYAMLReader(br)
	for doc := 1; ; doc++ {
		data, err := r.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: document %d: %w", path, doc, err)
		}
		js, err := yaml.YAMLToJSON(data)
		if err != nil {
			return fmt.Errorf("%s: document %d: %w", path, doc, err)
		}
		if err := addTyped(snap, js); err != nil {
			return fmt.Errorf("%s: document %d: %w", path, doc, err)
		}
	}
}

func addTyped(snap *policy.Snapshot, js []byte) error {
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return nil
	}
	var tm struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(js, &tm); err != nil {
		return err
	}
	if strings.HasSuffix(tm.Kind, "List") {
		for _, it := range tm.Items {
			if err := addTyped(snap, it); err != nil {
				return err
			}
		}
		return nil
	}
	strict := func(v any) error {
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.DisallowUnknownFields()
		return dec.Decode(v)
	}
	switch {
	case tm.Kind == "PersistentVolume" && tm.APIVersion == "v1":
		pv := &corev1.PersistentVolume{}
		if err := strict(pv); err != nil {
			return err
		}
		snap.PVs = append(snap.PVs, pv)
	case tm.Kind == "PersistentVolumeClaim" && tm.APIVersion == "v1":
		pvc := &corev1.PersistentVolumeClaim{}
		if err := strict(pvc); err != nil {
			return err
		}
		if pvc.Namespace == "" {
			pvc.Namespace = "default"
		}
		snap.PVCs = append(snap.PVCs, pvc)
	case tm.Kind == "Node" && tm.APIVersion == "v1":
		n := &corev1.Node{}
		if err := strict(n); err != nil {
			return err
		}
		snap.Nodes = append(snap.Nodes, n)
	case tm.Kind == "StorageClass" && tm.APIVersion == "storage.k8s.io/v1":
		sc := &storagev1.StorageClass{}
		if err := strict(sc); err != nil {
			return err
		}
		snap.Classes = append(snap.Classes, sc)
	}
	return nil
}
