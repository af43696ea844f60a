package image

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"golang.org/x/mod/modfile"
)

const modulePath = "github.com/pvguard/pvguard"

// repoRoot is the repository root: go test runs a package's tests in its directory, test/image.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if mod := goMod(t, root); mod.Module == nil || mod.Module.Mod.Path != modulePath {
		t.Fatalf("%s is not the root of %s", root, modulePath)
	}
	return root
}

func goMod(t *testing.T, root string) *modfile.File {
	t.Helper()
	name := filepath.Join(root, "go.mod")
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := modfile.ParseLax(name, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	return mod
}

func readFile(t *testing.T, root, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// dockerfile is a parsed Dockerfile.
type dockerfile struct {
	stages   []instructions.Stage
	metaArgs []instructions.ArgCommand // ARGs before the first FROM
	escape   rune
}

// parseDockerfile parses src as BuildKit does. Warnings count as errors: the parser's (empty
// continuation lines and the like) and those of the lint rules BuildKit runs while parsing
// instructions (stage name and FROM ... AS casing, deprecated MAINTAINER, ...).
func parseDockerfile(src []byte) (*dockerfile, error) {
	res, err := parser.Parse(bytes.NewReader(src))
	if err != nil {
		return nil, err
	}
	var warnings []string
	for _, w := range res.Warnings {
		warnings = append(warnings, at(w.Location)+w.Short)
	}
	lint := linter.New(&linter.Config{Warn: func(rule, _, _, msg string, loc []parser.Range) {
		var first *parser.Range
		if len(loc) > 0 {
			first = &loc[0]
		}
		warnings = append(warnings, at(first)+rule+": "+msg)
	}})
	stages, metaArgs, err := instructions.Parse(res.AST, lint)
	if err != nil {
		return nil, err
	}
	if len(warnings) > 0 {
		return nil, fmt.Errorf("warnings: %q", warnings)
	}
	return &dockerfile{stages: stages, metaArgs: metaArgs, escape: res.EscapeToken}, nil
}

func at(r *parser.Range) string {
	if r == nil {
		return ""
	}
	return fmt.Sprintf("line %d: ", r.Start.Line)
}
