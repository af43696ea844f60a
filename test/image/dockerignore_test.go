package image

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// buildInputs are the files, relative to the repository root, that the build stage reads from the
// build context: go.mod, go.sum, the other sources COPYed from the context by name, and the Go
// and embedded files of this module's packages that cmd/pvguard is built from (as go list sees
// them for the image's build: linux, no cgo).
func buildInputs(t *testing.T, root string, df *dockerfile) []string {
	t.Helper()
	inputs := []string{"go.mod", "go.sum"}
	for i := range df.stages {
		for _, c := range commands[*instructions.CopyCommand](&df.stages[i]) {
			if c.From != "" {
				continue
			}
			for _, src := range c.SourcePaths {
				if src = filepath.ToSlash(filepath.Clean(strings.TrimPrefix(src, "/"))); src != "." {
					inputs = append(inputs, src)
				}
			}
		}
	}

	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Dir,Module,GoFiles,CgoFiles,EmbedFiles,SFiles,HFiles,SysoFiles", mainPackage)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=linux", "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	packages := 0
	for {
		var p struct {
			ImportPath                                               string
			Dir                                                      string
			Module                                                   *struct{ Main bool }
			GoFiles, CgoFiles, EmbedFiles, SFiles, HFiles, SysoFiles []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if p.Module == nil || !p.Module.Main {
			continue
		}
		packages++
		dir, err := filepath.Rel(root, p.Dir)
		if err != nil || !filepath.IsLocal(dir) {
			t.Fatalf("package %s is in %s, outside %s", p.ImportPath, p.Dir, root)
		}
		for _, files := range [][]string{p.GoFiles, p.CgoFiles, p.EmbedFiles, p.SFiles, p.HFiles, p.SysoFiles} {
			for _, f := range files {
				inputs = append(inputs, filepath.ToSlash(filepath.Join(dir, f)))
			}
		}
	}
	if packages == 0 {
		t.Fatalf("go list found no package of %s among the dependencies of %s", modulePath, mainPackage)
	}
	return inputs
}

// ignoredOf returns those of paths that the .dockerignore patterns leave out of the build
// context, matched as the Docker CLI and BuildKit match them (a path is out if it or a parent
// directory is, unless a later ! pattern brings it back).
func ignoredOf(dockerignore []byte, paths []string) ([]string, error) {
	patterns, err := ignorefile.ReadAll(bytes.NewReader(dockerignore))
	if err != nil {
		return nil, err
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		return nil, err
	}
	var ignored []string
	for _, p := range paths {
		out, err := pm.MatchesOrParentMatches(p)
		if err != nil {
			return nil, err
		}
		if out {
			ignored = append(ignored, p)
		}
	}
	return ignored, nil
}

func TestDockerignoreKeepsBuildInputs(t *testing.T) {
	root := repoRoot(t)
	df, err := parseDockerfile(readFile(t, root, "Dockerfile"))
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	inputs := buildInputs(t, root, df)
	for _, in := range inputs {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(in))); err != nil {
			t.Errorf("build input: %v", err)
		}
	}
	ignored, err := ignoredOf(readFile(t, root, ".dockerignore"), inputs)
	if err != nil {
		t.Fatalf(".dockerignore: %v", err)
	}
	for _, p := range ignored {
		t.Errorf(".dockerignore leaves %s out of the build context, but the image's build reads it", p)
	}
	if !slices.Contains(inputs, "internal/web/dashboard.html") {
		t.Errorf("build inputs %q lack internal/web/dashboard.html (embedded by package internal/web): go list was not read right", inputs)
	}
}

// TestDockerignoreExcludes checks that what must not be sent to the builder is not: binaries
// (hundreds of MB in bin/), version control and test output.
func TestDockerignoreExcludes(t *testing.T) {
	root := repoRoot(t)
	paths := []string{"bin/kube-apiserver", ".git/config", "pvguard", "audit/audit.test", "cover.out", "test/e2e/artifacts/dashboard-seeded.png"}
	ignored, err := ignoredOf(readFile(t, root, ".dockerignore"), paths)
	if err != nil {
		t.Fatalf(".dockerignore: %v", err)
	}
	for _, p := range paths {
		if !slices.Contains(ignored, p) {
			t.Errorf(".dockerignore does not leave %s out of the build context", p)
		}
	}
}

// TestDockerignoreChecksCatch adds patterns to .dockerignore that leave out something the build
// needs, and expects TestDockerignoreKeepsBuildInputs's matching to name it.
func TestDockerignoreChecksCatch(t *testing.T) {
	root := repoRoot(t)
	df, err := parseDockerfile(readFile(t, root, "Dockerfile"))
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	inputs := buildInputs(t, root, df)
	good := readFile(t, root, ".dockerignore")
	for _, tc := range []struct{ add, want string }{
		{"go.sum", "go.sum"},
		{"*.mod", "go.mod"},
		{"**/*.html", "internal/web/dashboard.html"},
		{"internal/web/*.html", "internal/web/dashboard.html"},
		{"**/*.go", "cmd/pvguard/main.go"},
		{"internal", "internal/cli/root.go"}, // the product commands
		{"*\n!go.*\n!**/*.go", "internal/web/dashboard.html"},
	} {
		t.Run(tc.add, func(t *testing.T) {
			ignored, err := ignoredOf(append(slices.Clone(good), "\n"+tc.add+"\n"...), inputs)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(ignored, tc.want) {
				t.Errorf("adding %q: %s not reported as left out (reported %q)", tc.add, tc.want, ignored)
			}
		})
	}
}
