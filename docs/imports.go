package docs

import (
	"bufio"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"
)

// importsFence opens, in development.md, the block that declares which of the module's packages
// each package may import; testImportsFence the block that declares what each package's tests
// import beyond that.
const (
	importsFence     = "```imports"
	testImportsFence = "```test-imports"
)

// ImportRules are the declared arrows: for each pattern (a package path relative to the module,
// or a prefix ending in "/..."), the packages it may import ("*" for any).
type ImportRules map[string][]string

// ReadImportRules reads the declared import graph from development.md: a fenced block opened by
// ```imports, one line per package, "package: allowed allowed ...", blank lines and lines
// starting with # ignored.
func ReadImportRules(pages fs.FS) (ImportRules, error) {
	return readRules(pages, importsFence)
}

// ReadTestImportRules reads, in the same form, the block opened by ```test-imports: for each
// package whose tests import more of the module than the package may, what more.
func ReadTestImportRules(pages fs.FS) (ImportRules, error) {
	return readRules(pages, testImportsFence)
}

func readRules(pages fs.FS, fence string) (ImportRules, error) {
	data, err := fs.ReadFile(pages, "development.md")
	if err != nil {
		return nil, err
	}
	text := string(data)
	start := strings.Index(text, fence+"\n")
	if start < 0 {
		return nil, fmt.Errorf("development.md has no %s block", fence)
	}
	body := text[start+len(fence)+1:]
	end := strings.Index(body, "```")
	if end < 0 {
		return nil, fmt.Errorf("development.md: the %s block is not closed", fence)
	}
	rules := ImportRules{}
	sc := bufio.NewScanner(strings.NewReader(body[:end]))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		pkg, allowed, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("development.md: line %d of the %s block has no ':': %q", n, fence, line)
		}
		pkg = strings.TrimSpace(pkg)
		if _, dup := rules[pkg]; dup {
			return nil, fmt.Errorf("development.md: %s is declared twice in the %s block", pkg, fence)
		}
		rules[pkg] = strings.Fields(allowed)
	}
	return rules, nil
}

// rulesFor returns the declared entry for pkg: its own line, or the longest "prefix/..." pattern
// that covers it.
func (r ImportRules) rulesFor(pkg string) ([]string, bool) {
	if allowed, ok := r[pkg]; ok {
		return allowed, true
	}
	best, found := "", false
	for pattern := range r {
		prefix, ok := strings.CutSuffix(pattern, "/...")
		if ok && (pkg == prefix || strings.HasPrefix(pkg, prefix+"/")) && len(prefix) > len(best) {
			best, found = prefix, true
		}
	}
	if !found {
		return nil, false
	}
	return r[best+"/..."], true
}

// allows reports whether an allowed entry admits the imported package.
func allows(allowed []string, imported string) bool {
	for _, a := range allowed {
		if a == "*" || a == imported {
			return true
		}
		if prefix, ok := strings.CutSuffix(a, "/..."); ok && (imported == prefix || strings.HasPrefix(imported, prefix+"/")) {
			return true
		}
	}
	return false
}

// CheckImports lists where the module's packages disagree with the declared graph. imports maps
// each package (relative to the module) to the module packages it imports, test files excluded.
// A package with no declared line, and an arrow the declaration does not allow, are errors.
func CheckImports(rules ImportRules, imports map[string][]string) []error {
	var errs []error
	pkgs := make([]string, 0, len(imports))
	for p := range imports {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		allowed, ok := rules.rulesFor(p)
		if !ok {
			errs = append(errs, fmt.Errorf("package %s has no line in development.md's %s block", p, importsFence))
			continue
		}
		for _, imported := range imports[p] {
			if !allows(allowed, imported) {
				errs = append(errs, fmt.Errorf("%s imports %s, which development.md's %s block does not allow (allowed: %s)",
					p, imported, importsFence, strings.Join(allowed, " ")))
			}
		}
	}
	return errs
}

// CheckTestImports lists where the module's packages' tests import a module package that neither
// the package's declared arrows (rules) nor its tests' (testRules, a line per package) allow.
// testImports maps each package to the module packages its test files import (both the package's
// own and its external test package), itself excluded.
func CheckTestImports(rules, testRules ImportRules, testImports map[string][]string) []error {
	var errs []error
	pkgs := make([]string, 0, len(testImports))
	for p := range testImports {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		allowed, _ := rules.rulesFor(p)
		for _, imported := range testImports[p] {
			if imported != p && !allows(allowed, imported) && !allows(testRules[p], imported) {
				errs = append(errs, fmt.Errorf("the tests of %s import %s, which development.md's %s and %s blocks do not allow",
					p, imported, importsFence, testImportsFence))
			}
		}
	}
	return errs
}

// CheckDeclaredUsed lists the lines of the block opened by fence that match no package and, for
// the lines naming one package, the allowed imports it does not make: a declaration wider than
// the graph would let a new arrow in unseen. Pattern lines ("prefix/...") and "*" are not held to this.
func CheckDeclaredUsed(rules ImportRules, imports map[string][]string, fence string) []error {
	var errs []error
	lines := make([]string, 0, len(rules))
	for l := range rules {
		lines = append(lines, l)
	}
	sort.Strings(lines)
	for _, line := range lines {
		if prefix, ok := strings.CutSuffix(line, "/..."); ok {
			matched := false
			for p := range imports {
				matched = matched || p == prefix || strings.HasPrefix(p, prefix+"/")
			}
			if !matched {
				errs = append(errs, fmt.Errorf("development.md's %s block declares %s, which matches no package", fence, line))
			}
			continue
		}
		made, ok := imports[line]
		if !ok {
			errs = append(errs, fmt.Errorf("development.md's %s block declares %s, which is no package of the module", fence, line))
			continue
		}
		for _, a := range rules[line] {
			if a == "*" || strings.HasSuffix(a, "/...") || slices.Contains(made, a) {
				continue
			}
			errs = append(errs, fmt.Errorf("development.md's %s block lets %s import %s, which it does not: remove the arrow", fence, line, a))
		}
	}
	return errs
}

// Relative strips the module path from an import path; ok is false for a package outside it.
func Relative(module, importPath string) (string, bool) {
	if importPath == module {
		return ".", true
	}
	rel, ok := strings.CutPrefix(importPath, module+"/")
	return path.Clean(rel), ok
}
