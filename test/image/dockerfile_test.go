package image

import (
	"debug/elf"
	"errors"
	"fmt"
	"go/version"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/shell"

	"github.com/pvguard/pvguard/internal/cli"
)

const (
	// binary is where the final stage has pvguard, and its entrypoint.
	binary = "/pvguard"
	// mainPackage is what the build stage must build.
	mainPackage = "./cmd/pvguard"
	// versionVar is the variable the build stamps with -X.
	versionVar = modulePath + "/internal/cli.Version"
	// versionSentinel stands for the VERSION build argument when the build command is read.
	versionSentinel = "v0.0.0-sentinel"
)

// facts are what the Dockerfile is checked against, from outside it.
type facts struct {
	goDirective string // go.mod's go directive
	listen      string // pvguard serve's default --listen
}

// A check is one property the Dockerfile must have; it returns why the Dockerfile lacks it.
type check struct {
	name string
	fn   func(df *dockerfile, f facts) error
}

var checks = []check{
	{"stages", checkStages},
	{"final-base", checkFinalBase},
	{"final-user", checkFinalUser},
	{"entrypoint", checkEntrypoint},
	{"no-shell", checkNoShell},
	{"expose", checkExpose},
	{"cgo", checkCgo},
	{"main-package", checkMainPackage},
	{"version-stamp", checkVersionStamp},
	{"copy-binary", checkCopyBinary},
	{"go-version", checkGoVersion},
}

func repoFacts(t *testing.T, root string) facts {
	t.Helper()
	mod := goMod(t, root)
	if mod.Go == nil {
		t.Fatal("go.mod has no go directive")
	}
	return facts{goDirective: mod.Go.Version, listen: cli.DefaultServeFlags().Listen}
}

func TestDockerfile(t *testing.T) {
	root := repoRoot(t)
	df, err := parseDockerfile(readFile(t, root, "Dockerfile"))
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	f := repoFacts(t, root)
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if err := c.fn(df, f); err != nil {
				t.Errorf("Dockerfile: %v", err)
			}
		})
	}
}

// TestDockerfileChecksCatch breaks the Dockerfile (or a fact) in one way per case and expects the
// named check to fail: every check can fail, and fails for the reason it is there. A case whose
// text is no longer in the Dockerfile fails too; update it along with the Dockerfile.
func TestDockerfileChecksCatch(t *testing.T) {
	root := repoRoot(t)
	src := string(readFile(t, root, "Dockerfile"))
	good := repoFacts(t, root)
	for _, tc := range []struct {
		name     string
		old, new string
		facts    func(*facts)
		check    string // "" means parsing must fail
	}{
		{name: "lowercase as", old: " AS build", new: " as build"},
		{name: "maintainer", old: "WORKDIR /src\n", new: "WORKDIR /src\nMAINTAINER someone\n"},
		{name: "empty continuation line", old: "go-build \\\n", new: "go-build \\\n\n"},
		{name: "unknown instruction", old: "WORKDIR /src\n", new: "WORKDR /src\n"},
		{name: "one stage", old: "FROM gcr.io/distroless/static-debian12:nonroot\n", new: "", check: "stages"},
		{name: "root distroless", old: "static-debian12:nonroot", new: "static-debian12:latest", check: "final-base"},
		{name: "debug distroless", old: "static-debian12:nonroot", new: "static-debian12:debug-nonroot", check: "final-base"},
		{name: "not distroless", old: "gcr.io/distroless/static-debian12:nonroot", new: "debian:bookworm-slim", check: "final-base"},
		{name: "uid 0", old: "USER 65532:65532", new: "USER 0:65532", check: "final-user"},
		{name: "gid 0", old: "USER 65532:65532", new: "USER 65532:0", check: "final-user"},
		{name: "user root", old: "USER 65532:65532", new: "USER root", check: "final-user"},
		{name: "user by name", old: "USER 65532:65532", new: "USER nonroot", check: "final-user"},
		{name: "no user", old: "USER 65532:65532\n", new: "", check: "final-user"},
		{name: "shell-form entrypoint", old: `ENTRYPOINT ["/pvguard"]`, new: "ENTRYPOINT /pvguard", check: "entrypoint"},
		{name: "other entrypoint", old: `ENTRYPOINT ["/pvguard"]`, new: `ENTRYPOINT ["/bin/pvguard"]`, check: "entrypoint"},
		{name: "no serve", old: `CMD ["serve"]`, new: `CMD ["audit"]`, check: "entrypoint"},
		{name: "run in final stage", old: "USER 65532:65532\n", new: "USER 65532:65532\nRUN true\n", check: "no-shell"},
		{name: "shell-form cmd", old: `CMD ["serve"]`, new: "CMD serve", check: "no-shell"},
		{name: "other port", old: "EXPOSE 9443", new: "EXPOSE 8443", check: "expose"},
		{name: "listen elsewhere", facts: func(f *facts) { f.listen = ":8443" }, check: "expose"},
		{name: "cgo default", old: "CGO_ENABLED=0 go build", new: "go build", check: "cgo"},
		{name: "cgo on", old: "CGO_ENABLED=0 go build", new: "CGO_ENABLED=1 go build", check: "cgo"},
		{name: "other package", old: " ./cmd/pvguard\n", new: " ./internal/cli\n", check: "main-package"},
		{name: "no go build", old: "go build", new: "go install", check: "main-package"},
		{name: "wrong variable", old: "cli.Version=", new: "cli.version=", check: "version-stamp"},
		{name: "no VERSION argument", old: "ARG VERSION=dev\nRUN", new: "RUN", check: "version-stamp"},
		{name: "other binary", old: "--from=build /out/pvguard", new: "--from=build /out/other", check: "copy-binary"},
		{name: "other source stage", old: "--from=build", new: "--from=golang:1.26.8-bookworm", check: "copy-binary"},
		{name: "floating go tag", old: "golang:1.26.8-bookworm AS", new: "golang:1.26-bookworm AS", check: "go-version"},
		{name: "older go", old: "golang:1.26.8-bookworm AS", new: "golang:1.25.9-bookworm AS", check: "go-version"},
		{name: "not golang", old: "golang:1.26.8-bookworm AS", new: "debian:bookworm AS", check: "go-version"},
		{name: "newer go.mod", facts: func(f *facts) { f.goDirective = "1.27.0" }, check: "go-version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			broken := src
			if tc.old != "" {
				if !strings.Contains(src, tc.old) {
					t.Fatalf("the Dockerfile no longer contains %q; update this case", tc.old)
				}
				broken = strings.Replace(src, tc.old, tc.new, 1)
			}
			f := good
			if tc.facts != nil {
				tc.facts(&f)
			}
			df, err := parseDockerfile([]byte(broken))
			if tc.check == "" {
				if err == nil {
					t.Fatal("parsed without error or warning")
				}
				t.Logf("parse: %v", err)
				return
			}
			if err != nil {
				t.Fatalf("does not parse: %v", err)
			}
			i := slices.IndexFunc(checks, func(c check) bool { return c.name == tc.check })
			if i < 0 {
				t.Fatalf("no check %q", tc.check)
			}
			if err := checks[i].fn(df, f); err == nil {
				t.Errorf("check %s passed", tc.check)
			} else {
				t.Logf("check %s: %v", tc.check, err)
			}
		})
	}
}

// TestBuildStageBuildsPvguard runs the build stage's go build command on this machine, with only
// its output moved to a temporary directory, and runs what it built: a static binary that prints
// the VERSION it was built with.
func TestBuildStageBuildsPvguard(t *testing.T) {
	if testing.Short() {
		t.Skip("builds pvguard")
	}
	root := repoRoot(t)
	df, err := parseDockerfile(readFile(t, root, "Dockerfile"))
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	b, err := findGoBuild(df)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "pvguard")
	script, err := b.withOutput(out)
	if err != nil {
		t.Fatal(err)
	}
	const want = "v0.0.0-imagetest"
	env := append(os.Environ(), b.env...)
	env = append(env, "VERSION="+want)

	t.Logf("sh -c %q", script)
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = root
	cmd.Env = env
	if output, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the build stage's go build: %v\n%s", err, output)
	}

	exe, err := elf.Open(out)
	if err != nil {
		t.Fatalf("the build stage's go build wrote no executable: %v", err)
	}
	defer exe.Close()
	for _, p := range exe.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("pvguard is dynamically linked (%s), but distroless/static has no C library", p.Type)
		}
	}

	output, err := exec.Command(out, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("pvguard version: %v\n%s", err, output)
	}
	if !strings.HasPrefix(string(output), "pvguard "+want+" ") {
		t.Errorf("pvguard version printed %q, want the version %q the build was given", output, want)
	}
}

func finalStage(df *dockerfile) *instructions.Stage {
	return &df.stages[len(df.stages)-1]
}

// commands are the commands of type T in a stage, in order.
func commands[T instructions.Command](s *instructions.Stage) []T {
	var cmds []T
	for _, c := range s.Commands {
		if c, ok := c.(T); ok {
			cmds = append(cmds, c)
		}
	}
	return cmds
}

// base is a stage's base image with the ARGs before the first FROM expanded.
func (df *dockerfile) base(s *instructions.Stage) (string, error) {
	var env []string
	for _, a := range df.metaArgs {
		for _, kv := range a.Args {
			env = append(env, kv.Key+"="+kv.ValueString())
		}
	}
	name, _, err := shell.NewLex(df.escape).ProcessWord(s.BaseName, shell.EnvsFromSlice(env))
	return name, err
}

var imageRef = regexp.MustCompile(`^(?:(?:docker\.io/)?library/)?([a-z0-9./_-]+)(?::([\w.-]+))?(?:@sha256:[0-9a-f]{64})?$`)

// splitImage returns an image reference's repository and tag.
func splitImage(ref string) (repo, tag string, err error) {
	m := imageRef.FindStringSubmatch(ref)
	if m == nil {
		return "", "", fmt.Errorf("cannot read image reference %q", ref)
	}
	return m[1], m[2], nil
}

func checkStages(df *dockerfile, _ facts) error {
	if len(df.stages) < 2 {
		return fmt.Errorf("%d stage(s), want a build stage and a final stage", len(df.stages))
	}
	return nil
}

func checkFinalBase(df *dockerfile, _ facts) error {
	ref, err := df.base(finalStage(df))
	if err != nil {
		return err
	}
	repo, tag, err := splitImage(ref)
	if err != nil {
		return err
	}
	// distroless's nonroot tags run as uid 65532; its debug tags add a busybox shell.
	parts := strings.Split(tag, "-")
	if !strings.HasPrefix(repo, "gcr.io/distroless/") || !slices.Contains(parts, "nonroot") || slices.Contains(parts, "debug") {
		return fmt.Errorf("final stage is FROM %s, want a gcr.io/distroless image with a nonroot (not debug) tag", ref)
	}
	return nil
}

func checkFinalUser(df *dockerfile, _ facts) error {
	users := commands[*instructions.UserCommand](finalStage(df))
	if len(users) == 0 {
		return errors.New("final stage sets no USER")
	}
	user := users[len(users)-1].User
	// Numeric, so that the kubelet can enforce runAsNonRoot without reading /etc/passwd.
	uid, gid, hasGroup := strings.Cut(user, ":")
	if n, err := strconv.ParseUint(uid, 10, 32); err != nil || n == 0 {
		return fmt.Errorf("final stage runs as USER %s, want a numeric uid other than 0", user)
	}
	if n, err := strconv.ParseUint(gid, 10, 32); hasGroup && (err != nil || n == 0) {
		return fmt.Errorf("final stage runs as USER %s, want a numeric gid other than 0", user)
	}
	return nil
}

func checkEntrypoint(df *dockerfile, _ facts) error {
	final := finalStage(df)
	eps := commands[*instructions.EntrypointCommand](final)
	if len(eps) == 0 {
		return errors.New("final stage has no ENTRYPOINT")
	}
	ep := eps[len(eps)-1]
	if ep.PrependShell || !slices.Equal(ep.CmdLine, []string{binary}) {
		return fmt.Errorf("%s, want ENTRYPOINT [%q]", ep.String(), binary)
	}
	cmds := commands[*instructions.CmdCommand](final)
	if len(cmds) == 0 || len(cmds[len(cmds)-1].CmdLine) == 0 || cmds[len(cmds)-1].CmdLine[0] != "serve" {
		return errors.New(`final stage's CMD does not start with "serve"`)
	}
	return nil
}

func checkNoShell(df *dockerfile, _ facts) error {
	final := finalStage(df)
	if runs := commands[*instructions.RunCommand](final); len(runs) > 0 {
		return fmt.Errorf("final stage has %s, but distroless/static has no shell", runs[0].String())
	}
	for _, c := range final.Commands {
		switch c := c.(type) {
		case *instructions.EntrypointCommand:
			if c.PrependShell {
				return fmt.Errorf("%s is in shell form, but distroless/static has no shell", c.String())
			}
		case *instructions.CmdCommand:
			if c.PrependShell {
				return fmt.Errorf("%s is in shell form, but distroless/static has no shell", c.String())
			}
		}
	}
	return nil
}

func checkExpose(df *dockerfile, f facts) error {
	_, port, err := net.SplitHostPort(f.listen)
	if err != nil {
		return err
	}
	var exposed []string
	for _, e := range commands[*instructions.ExposeCommand](finalStage(df)) {
		exposed = append(exposed, e.Ports...)
	}
	if !slices.Contains(exposed, port) && !slices.Contains(exposed, port+"/tcp") {
		return fmt.Errorf("final stage exposes %q, not %s, where pvguard serve listens by default", exposed, port)
	}
	return nil
}

// goBuild is the build stage's go build command.
type goBuild struct {
	stage  int
	run    *instructions.RunCommand
	script string   // the shell command, as written
	words  []string // its words, split as the Dockerfile's shell lexer does, VERSION=versionSentinel
	args   []string // the words after "go build"
	env    []string // the stage's ARG defaults and ENVs before the RUN, as the RUN sees them
	hasArg map[string]bool
}

// findGoBuild finds the one RUN of go build outside the final stage.
func findGoBuild(df *dockerfile) (*goBuild, error) {
	var found []*goBuild
	for i := range df.stages[:len(df.stages)-1] {
		var env []string
		hasArg := map[string]bool{}
		for _, c := range df.stages[i].Commands {
			switch c := c.(type) {
			case *instructions.ArgCommand:
				for _, kv := range c.Args {
					hasArg[kv.Key] = true
					if kv.Value != nil {
						env = append(env, kv.Key+"="+*kv.Value)
					}
				}
			case *instructions.EnvCommand:
				for _, kv := range c.Env {
					env = append(env, kv.Key+"="+kv.Value)
				}
			case *instructions.RunCommand:
				if !strings.Contains(strings.Join(c.CmdLine, " "), "go build") {
					continue
				}
				if !c.PrependShell || len(c.CmdLine) != 1 || len(c.Files) > 0 {
					return nil, fmt.Errorf("%s: want go build in a one-line shell-form RUN", c.String())
				}
				words, err := shell.NewLex(df.escape).ProcessWords(c.CmdLine[0], shell.EnvsFromSlice(append(slices.Clone(env), "VERSION="+versionSentinel)))
				if err != nil {
					return nil, err
				}
				b := &goBuild{stage: i, run: c, script: c.CmdLine[0], words: words, env: slices.Clone(env), hasArg: maps.Clone(hasArg)}
				for j := 0; j+1 < len(words); j++ {
					if words[j] == "go" && words[j+1] == "build" {
						b.args = words[j+2:]
						break
					}
				}
				if end := slices.IndexFunc(b.args, func(w string) bool { return w == "&&" || w == "||" || w == ";" || w == "|" }); end >= 0 {
					b.args = b.args[:end]
				}
				found = append(found, b)
			}
		}
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("%d RUNs of go build before the final stage, want 1", len(found))
	}
	return found[0], nil
}

// goBuildValueFlags are the go build flags that take a value.
var goBuildValueFlags = []string{"-C", "-o", "-p", "-asmflags", "-buildmode", "-compiler", "-gccgoflags", "-gcflags", "-installsuffix", "-ldflags", "-mod", "-modfile", "-overlay", "-pgo", "-pkgdir", "-tags", "-toolexec"}

// flags returns the go build flags and their values (nil for boolean ones), and the packages.
func (b *goBuild) flags() (map[string][]string, []string) {
	flags := map[string][]string{}
	var pkgs []string
	for i := 0; i < len(b.args); i++ {
		a := b.args[i]
		if !strings.HasPrefix(a, "-") {
			pkgs = append(pkgs, a)
			continue
		}
		a = "-" + strings.TrimLeft(a, "-")
		if name, value, ok := strings.Cut(a, "="); ok {
			flags[name] = append(flags[name], value)
		} else if slices.Contains(goBuildValueFlags, a) && i+1 < len(b.args) {
			flags[a] = append(flags[a], b.args[i+1])
			i++
		} else {
			flags[a] = nil
		}
	}
	return flags, pkgs
}

// output is the file go build writes.
func (b *goBuild) output() (string, error) {
	flags, _ := b.flags()
	if o := flags["-o"]; len(o) == 1 {
		return o[0], nil
	}
	return "", fmt.Errorf("%s: want one -o", b.run.String())
}

// withOutput is the script with its -o output, and nothing else, replaced by out.
func (b *goBuild) withOutput(out string) (string, error) {
	o, err := b.output()
	if err != nil {
		return "", err
	}
	re := regexp.MustCompile(`(\s-o[\s=]+)` + regexp.QuoteMeta(o) + `(\s|$)`)
	if n := len(re.FindAllStringIndex(b.script, -1)); n != 1 {
		return "", fmt.Errorf("found -o %s %d times in %q, want once, unquoted", o, n, b.script)
	}
	return re.ReplaceAllString(b.script, "${1}'"+strings.ReplaceAll(out, "$", "$$")+"'${2}"), nil
}

func checkCgo(df *dockerfile, _ facts) error {
	b, err := findGoBuild(df)
	if err != nil {
		return err
	}
	cgo := ""
	for _, kv := range b.env {
		if v, ok := strings.CutPrefix(kv, "CGO_ENABLED="); ok {
			cgo = v
		}
	}
	// Assignments in front of the command.
	for _, w := range b.words {
		if w == "go" {
			break
		}
		if v, ok := strings.CutPrefix(w, "CGO_ENABLED="); ok {
			cgo = v
		}
	}
	if cgo != "0" {
		return fmt.Errorf("%s: want CGO_ENABLED=0, distroless/static has no C library", b.run.String())
	}
	return nil
}

func checkMainPackage(df *dockerfile, _ facts) error {
	b, err := findGoBuild(df)
	if err != nil {
		return err
	}
	if _, pkgs := b.flags(); !slices.Equal(pkgs, []string{mainPackage}) && !slices.Equal(pkgs, []string{modulePath + "/cmd/pvguard"}) {
		return fmt.Errorf("go build builds %q, want %s", pkgs, mainPackage)
	}
	return nil
}

func checkVersionStamp(df *dockerfile, _ facts) error {
	b, err := findGoBuild(df)
	if err != nil {
		return err
	}
	if !b.hasArg["VERSION"] {
		return errors.New("the build stage declares no ARG VERSION before go build, so --build-arg VERSION would not reach it")
	}
	flags, _ := b.flags()
	for _, ld := range flags["-ldflags"] {
		if strings.Contains(" "+ld+" ", " -X "+versionVar+"="+versionSentinel+" ") {
			return nil
		}
	}
	return fmt.Errorf("go build -ldflags %q does not set -X %s=${VERSION}", flags["-ldflags"], versionVar)
}

func checkCopyBinary(df *dockerfile, _ facts) error {
	b, err := findGoBuild(df)
	if err != nil {
		return err
	}
	out, err := b.output()
	if err != nil {
		return err
	}
	from := df.stages[b.stage].Name
	for _, c := range commands[*instructions.CopyCommand](finalStage(df)) {
		if (c.From == strconv.Itoa(b.stage) || from != "" && strings.EqualFold(c.From, from)) &&
			slices.Equal(c.SourcePaths, []string{out}) && c.DestPath == binary {
			return nil
		}
	}
	return fmt.Errorf("final stage does not COPY --from=%s %s %s", from, out, binary)
}

var goImageTag = regexp.MustCompile(`^(\d+\.\d+(?:\.\d+|rc\d+)?)(?:-[\w.-]+)?$`)

func checkGoVersion(df *dockerfile, f facts) error {
	b, err := findGoBuild(df)
	if err != nil {
		return err
	}
	ref, err := df.base(&df.stages[b.stage])
	if err != nil {
		return err
	}
	repo, tag, err := splitImage(ref)
	if err != nil {
		return err
	}
	m := goImageTag.FindStringSubmatch(tag)
	if repo != "golang" || m == nil {
		return fmt.Errorf("build stage is FROM %s, want golang:<go version>[-variant]", ref)
	}
	// The golang images set GOTOOLCHAIN=local: the image's Go must satisfy the go directive itself.
	// A tag without the patch release, like 1.26, is older than 1.26.x and fails this.
	if version.Compare("go"+m[1], "go"+f.goDirective) < 0 {
		return fmt.Errorf("build stage has Go %s (%s), older than go.mod's go %s", m[1], ref, f.goDirective)
	}
	return nil
}
