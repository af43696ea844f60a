package docs

import (
	"os/exec"
	"strings"
	"testing"
	"testing/fstest"
)

const module = "github.com/pvguard/pvguard"

// moduleImports lists, with go list, the module packages each of the module's packages imports
// (test files excluded).
func moduleImports(t *testing.T) map[string][]string {
	return listImports(t, `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`)
}

// moduleTestImports lists the module packages each package's test files import, its own and its
// external test package's.
func moduleTestImports(t *testing.T) map[string][]string {
	return listImports(t, `{{.ImportPath}}{{range .TestImports}} {{.}}{{end}}{{range .XTestImports}} {{.}}{{end}}`)
}

func listImports(t *testing.T, format string) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", format, module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, ok := Relative(module, fields[0])
		if !ok {
			continue
		}
		imports[pkg] = nil
		for _, imp := range fields[1:] {
			if rel, ok := Relative(module, imp); ok {
				imports[pkg] = append(imports[pkg], rel)
			}
		}
	}
	return imports
}

// TestImportGraphIsTheDeclaredOne: every package of the module imports only what
// development.md's import graph allows it, so the graph stays one-way.
func TestImportGraphIsTheDeclaredOne(t *testing.T) {
	rules, err := ReadImportRules(Pages)
	if err != nil {
		t.Fatal(err)
	}
	imports := moduleImports(t)
	if len(imports) < 10 {
		t.Fatalf("go list found %d packages; the module has more", len(imports))
	}
	for _, err := range CheckImports(rules, imports) {
		t.Error(err)
	}
	for _, err := range CheckDeclaredUsed(rules, imports, importsFence) {
		t.Error(err)
	}
}

// TestTestImportsAreTheDeclaredOnes: the tests of every package import only what the package may,
// or what development.md's test-imports block adds for them, and that block is no wider than the
// tests' imports.
func TestTestImportsAreTheDeclaredOnes(t *testing.T) {
	rules, err := ReadImportRules(Pages)
	if err != nil {
		t.Fatal(err)
	}
	testRules, err := ReadTestImportRules(Pages)
	if err != nil {
		t.Fatal(err)
	}
	testImports := moduleTestImports(t)
	for _, err := range CheckTestImports(rules, testRules, testImports) {
		t.Error(err)
	}
	for _, err := range CheckDeclaredUsed(testRules, testImports, testImportsFence) {
		t.Error(err)
	}
}

// TestCheckTestImportsFindsNewArrows: a test import that neither block allows is reported; the
// package itself (an external test package) and either block's arrows are not.
func TestCheckTestImportsFindsNewArrows(t *testing.T) {
	rules := ImportRules{"policy": {"storage"}, "webhook": {"policy"}, "test/...": {"*"}}
	testRules := ImportRules{"webhook": {"test/testobj"}}
	errs := CheckTestImports(rules, testRules, map[string][]string{
		"policy":   {"policy", "storage", "test/testobj"},
		"webhook":  {"webhook", "policy", "test/testobj", "internal/web"},
		"test/e2e": {"webhook", "binder"},
	})
	want := []string{"the tests of policy import test/testobj", "the tests of webhook import internal/web"}
	if len(errs) != len(want) {
		t.Fatalf("errors %v, want %d", errs, len(want))
	}
	for i, err := range errs {
		if !strings.Contains(err.Error(), want[i]) {
			t.Errorf("error %q, want one containing %q", err, want[i])
		}
	}
}

// TestCheckDeclaredUsedFindsWideDeclarations: an allowed import a package does not make, and a
// line for no package, are reported; patterns are not held to it.
func TestCheckDeclaredUsedFindsWideDeclarations(t *testing.T) {
	rules := ImportRules{"storage": nil, "policy": {"storage", "clusterstate"}, "gone": nil, "test/...": {"*"}, "tools/...": {"*"}}
	imports := map[string][]string{"storage": nil, "policy": {"storage"}, "test/e2e": {"policy"}}
	errs := CheckDeclaredUsed(rules, imports, importsFence)
	want := []string{"declares gone, which is no package", "lets policy import clusterstate", "declares tools/..., which matches no package"}
	if len(errs) != len(want) {
		t.Fatalf("errors %v, want %d", errs, len(want))
	}
	for i, err := range errs {
		if !strings.Contains(err.Error(), want[i]) {
			t.Errorf("error %q, want one containing %q", err, want[i])
		}
	}
}

// TestCheckImportsFindsNewArrows: an arrow the declaration does not allow, and a package it does
// not declare, are reported; patterns and "*" admit what they name.
func TestCheckImportsFindsNewArrows(t *testing.T) {
	const doc = "# Developing\n\n```imports\n# leaves first\nstorage:\npolicy: storage\nbinder: policy storage\n" +
		"internal/...: policy internal/...\ntest/...: *\n```\n"
	rules, err := ReadImportRules(fstest.MapFS{"development.md": {Data: []byte(doc)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		imports map[string][]string
		want    []string
	}{
		{name: "as declared", imports: map[string][]string{
			"storage": nil, "policy": {"storage"}, "binder": {"policy", "storage"},
			"internal/web": {"policy", "internal/access"}, "test/e2e": {"binder", "internal/web"}}},
		{name: "a cycle", imports: map[string][]string{"storage": {"policy"}, "policy": {"storage"}},
			want: []string{"storage imports policy"}},
		{name: "a new arrow", imports: map[string][]string{"policy": {"binder"}},
			want: []string{"policy imports binder"}},
		{name: "an undeclared package", imports: map[string][]string{"explain": {"policy"}},
			want: []string{"package explain has no line"}},
		{name: "a pattern", imports: map[string][]string{"internal/web": {"binder"}},
			want: []string{"internal/web imports binder"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := CheckImports(rules, tc.imports)
			if len(errs) != len(tc.want) {
				t.Fatalf("errors %v, want %d", errs, len(tc.want))
			}
			for i, err := range errs {
				if !strings.Contains(err.Error(), tc.want[i]) {
					t.Errorf("error %q, want one containing %q", err, tc.want[i])
				}
			}
		})
	}
	for _, bad := range []string{"# x\n", "```imports\npolicy storage\n```\n", "```imports\na:\na:\n```\n", "```imports\na:\n"} {
		if _, err := ReadImportRules(fstest.MapFS{"development.md": {Data: []byte(bad)}}); err == nil {
			t.Errorf("ReadImportRules(%q) = nil error", bad)
		}
	}
}

// TestDomainPackagesCarryNoHTTP: the vocabulary, the state, the rule engine, the binder, the audit
// and the explanations return values and errors; serving them over HTTP (routes, statuses, pages)
// is internal/web's, so none of their product files imports an HTTP package.
func TestDomainPackagesCarryNoHTTP(t *testing.T) {
	domain := []string{"storage", "clusterstate", "policy", "binder", "audit", "explain"}
	args := []string{"list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`}
	for _, p := range domain {
		args = append(args, module+"/"+p)
	}
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(domain) {
		t.Fatalf("go list gave %d packages, want %d: %q", len(lines), len(domain), out)
	}
	for _, line := range lines {
		fields := strings.Fields(line)
		for _, imp := range fields[1:] {
			if imp == "net/http" || strings.HasPrefix(imp, "net/http/") || imp == "html/template" || strings.HasPrefix(imp, "github.com/go-chi/") {
				t.Errorf("%s imports %s: serve its values from internal/web instead", fields[0], imp)
			}
		}
	}
}
