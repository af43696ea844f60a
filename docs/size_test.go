package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Product code is read in small pieces: no file over maxFileLines lines and no function over
// maxFuncLines (docs/development.md). Tests, test/ and hack/ are not held to it.
const (
	maxFileLines = 500
	maxFuncLines = 80
)

// TestProductCodeIsInSmallPieces holds every product file of the module to the limits.
func TestProductCodeIsInSmallPieces(t *testing.T) {
	out, err := exec.Command("git", "-C", "..", "ls-files", "*.go").Output()
	if err != nil {
		t.Skipf("git ls-files: %v (not a checkout)", err)
	}
	fs := token.NewFileSet()
	checked := 0
	for _, p := range strings.Fields(string(out)) {
		if strings.HasSuffix(p, "_test.go") || strings.HasPrefix(p, "test/") || strings.HasPrefix(p, "hack/") {
			continue
		}
		f, err := parser.ParseFile(fs, filepath.Join("..", p), nil, 0)
		if err != nil {
			t.Fatalf("parsing %s: %v", p, err)
		}
		checked++
		for _, e := range checkSizes(fs, p, f) {
			t.Error(e)
		}
	}
	if checked < 50 {
		t.Fatalf("checked %d product files; the module has more", checked)
	}
}

// TestCheckSizesFindsLongFunctionsAndFiles: the check reports a function and a file over the
// limits.
func TestCheckSizesFindsLongFunctionsAndFiles(t *testing.T) {
	src := "package x\n\nfunc short() {}\n\nfunc long() {\n" + strings.Repeat("\t_ = 1\n", maxFuncLines) + "}\n" +
		strings.Repeat("\n", maxFileLines)
	fs := token.NewFileSet()
	f, err := parser.ParseFile(fs, "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	errs := checkSizes(fs, "x.go", f)
	if len(errs) != 2 || !strings.Contains(errs[0], "x.go is ") || !strings.Contains(errs[1], "long is ") {
		t.Errorf("errors %q, want the file and long()", errs)
	}
}

// checkSizes lists what of file f (named name) is over the limits.
func checkSizes(fs *token.FileSet, name string, f *ast.File) []string {
	var errs []string
	if n := fs.File(f.Pos()).LineCount(); n > maxFileLines {
		errs = append(errs, name+" is "+strconv.Itoa(n)+" lines, over "+strconv.Itoa(maxFileLines)+": split it by job")
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		if n := fs.Position(fd.End()).Line - fs.Position(fd.Pos()).Line + 1; n > maxFuncLines {
			errs = append(errs, name+": "+fd.Name.Name+" is "+strconv.Itoa(n)+" lines, over "+strconv.Itoa(maxFuncLines)+": split it into named steps")
		}
	}
	return errs
}
