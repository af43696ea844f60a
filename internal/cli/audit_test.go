package cli_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pvguard/pvguard/audit"
	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/testobj"
)

const volumes = `apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-fs}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  hostPath: {path: /data/fs}
  claimRef: {kind: PersistentVolumeClaim, apiVersion: v1, namespace: team-a, name: db, uid: u-db}
status: {phase: Bound}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-failed}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  hostPath: {path: /data/failed}
status: {phase: Failed}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: ignored}
`

const claims = `{"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
   "metadata": {"name": "db", "namespace": "team-a", "uid": "u-db", "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
   "spec": {"accessModes": ["ReadWriteOnce"], "volumeMode": "Block", "storageClassName": "", "volumeName": "pv-fs",
            "resources": {"requests": {"storage": "1Gi"}}},
   "status": {"phase": "Bound"}}
]}`

func runAudit(t *testing.T, o cli.AuditFlags) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	o.Now = func() time.Time { return time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC) }
	err := cli.RunAudit(o, &out, &errOut)
	return out.String(), errOut.String(), err
}

func exitCode(err error) int {
	var e *cli.ExitError
	if errors.As(err, &e) {
		return e.Code
	}
	if err != nil {
		return -1
	}
	return 0
}

func TestAuditManifests(t *testing.T) {
	dir := testobj.WriteFiles(t, map[string]string{
		"volumes.yaml":       volumes,
		"nested/claims.json": claims,
		"notes.txt":          "not a manifest",
	})

	out, errOut, err := runAudit(t, cli.AuditFlags{Files: []string{dir}, Output: "table"})
	if err != nil || errOut != "" {
		t.Fatalf("audit: %v, stderr %q", err, errOut)
	}
	for _, want := range []string{"RULE", "PVG001 volume-mode-match", "PersistentVolumeClaim team-a/db requests volumeMode Block", "PVG024 failed-volume", "3 objects audited"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}

	out, _, err = runAudit(t, cli.AuditFlags{Files: []string{dir}, Output: "json"})
	if err != nil {
		t.Fatal(err)
	}
	var report audit.Report
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("json output: %v\n%s", err, out)
	}
	rules := map[string]bool{}
	for _, f := range report.Findings {
		rules[f.Rule] = true
	}
	if !rules["PVG001"] || !rules["PVG024"] || report.Summary.Objects != 3 || report.Summary.Actions["deny"] == 0 {
		t.Fatalf("unexpected report: %+v", report)
	}

	out, _, err = runAudit(t, cli.AuditFlags{Files: []string{dir}, Output: "report"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"apiVersion: openreports.io/v1alpha1\nkind: Report", "namespace: team-a", "kind: ClusterReport", "rule: PVG001", "result: fail", "rule: PVG024"} {
		if !strings.Contains(out, want) {
			t.Errorf("-o report lacks %q:\n%s", want, out)
		}
	}

	if _, _, err := runAudit(t, cli.AuditFlags{Files: []string{dir}, Output: "yaml", FailOn: "deny"}); exitCode(err) != cli.ExitFindings {
		t.Fatalf("--fail-on=deny with a deny finding: exit %d (%v), want %d", exitCode(err), err, cli.ExitFindings)
	}
	clean := testobj.WriteFiles(t, map[string]string{"ok.yaml": "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: fine}\nspec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], hostPath: {path: /x}}\nstatus: {phase: Available}\n"})
	if _, _, err := runAudit(t, cli.AuditFlags{Files: []string{clean}, Output: "table", FailOn: "warn"}); exitCode(err) != 0 {
		t.Fatalf("clean manifests: exit %d (%v)", exitCode(err), err)
	}
}

func TestAuditBadDocumentsAreNamedAndTheRestAudited(t *testing.T) {
	dir := testobj.WriteFiles(t, map[string]string{
		"good.yaml":   volumes,
		"bad.yaml":    "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: broken}\nspec: {capacity: {storage: lots}}\n---\nkind: [\n",
		"nokind.yaml": "apiVersion: v1\nmetadata: {name: x}\n",
	})
	out, errOut, err := runAudit(t, cli.AuditFlags{Files: []string{dir}, Output: "table"})
	if exitCode(err) != cli.ExitBadManifest {
		t.Fatalf("exit %d (%v), want %d", exitCode(err), err, cli.ExitBadManifest)
	}
	for _, want := range []string{"bad.yaml: document 1: PersistentVolume broken", "bad.yaml: document 2", "nokind.yaml: document 1: no kind"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if !strings.Contains(out, "PVG024 failed-volume") {
		t.Errorf("the good file was not audited:\n%s", out)
	}
}

// TestAuditRefusesRepeatedKeys: a key repeated in one object (volumeMode Block, then
// Filesystem) is not resolved to either value: the object is named on stderr with its file,
// document and field, the exit code is 2, and every other object is still audited, in the same
// file and in others.
func TestAuditRefusesRepeatedKeys(t *testing.T) {
	dir := testobj.WriteFiles(t, map[string]string{
		"volumes.yaml": volumes,
		"claims.json":  claims,
		"dup.yaml": `apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-twice}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  volumeMode: Block
  hostPath: {path: /data/twice}
  volumeMode: Filesystem
status: {phase: Failed}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-after}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  hostPath: {path: /data/after}
status: {phase: Failed}
`,
	})
	out, errOut, err := runAudit(t, cli.AuditFlags{Files: []string{dir}, Output: "json"})
	if exitCode(err) != cli.ExitBadManifest {
		t.Fatalf("exit %d (%v), want %d", exitCode(err), err, cli.ExitBadManifest)
	}
	want := `dup.yaml: document 1: PersistentVolume pv-twice: duplicate field "spec.volumeMode"`
	if !strings.Contains(errOut, want) {
		t.Errorf("stderr lacks %q:\n%s", want, errOut)
	}
	var report audit.Report
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("json output: %v\n%s", err, out)
	}
	found := map[string]bool{}
	for _, f := range report.Findings {
		found[f.Rule+" "+f.Object] = true
	}
	for _, f := range []string{"PVG024 pv-failed", "PVG024 pv-after", "PVG001 db"} {
		if !found[f] {
			t.Errorf("the other objects were not all audited: no %s in %v", f, found)
		}
	}
	if found["PVG024 pv-twice"] || report.Summary.Objects != 4 || len(report.Errors) != 1 {
		t.Errorf("the object with the repeated key was audited, or the report is off: %d objects, errors %q, findings %v",
			report.Summary.Objects, report.Errors, found)
	}
}

func TestAuditFlags(t *testing.T) {
	for _, o := range []cli.AuditFlags{
		{Output: "table"},
		{Files: []string{"x"}, Output: "xml"},
		{Files: []string{"x"}, Output: "table", FailOn: "sometimes"},
	} {
		if _, _, err := runAudit(t, o); err == nil || exitCode(err) != -1 {
			t.Errorf("options %+v: want a usage error, got %v", o, err)
		}
	}
	// An action that is not a threshold is refused too, and the error names the flag.
	o := cli.AuditFlags{Files: []string{"x"}, Output: "table", FailOn: policy.ActionAudit}
	if _, _, err := runAudit(t, o); err == nil || !strings.Contains(err.Error(), "--fail-on=audit") {
		t.Errorf("--fail-on=audit: want an error naming the flag, got %v", err)
	}
}

// TestAuditHTML: -o html writes the dashboard page as one file, with the findings and the
// bindings, and nothing it would have to fetch.
func TestAuditHTML(t *testing.T) {
	dir := testobj.WriteFiles(t, map[string]string{"volumes.yaml": volumes, "claims.json": claims})
	out, _, err := runAudit(t, cli.AuditFlags{Files: []string{dir}, Output: "html"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<!doctype html>", "PersistentVolumeClaim team-a/db requests volumeMode Block", "PVG024", "<td>pv-failed</td><td>Failed</td>"} {
		if !strings.Contains(out, want) {
			t.Errorf("-o html lacks %q", want)
		}
	}
	for _, banned := range []string{"http://", "https://", "src=\""} {
		if strings.Contains(out, banned) {
			t.Errorf("-o html refers to something outside the file (%q)", banned)
		}
	}
}

// TestAuditProgress: a large audit reports its progress on stderr, a small one stays quiet.
func TestAuditProgress(t *testing.T) {
	var b strings.Builder
	for i := range 1500 {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {name: pv-%d}\nspec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], hostPath: {path: /x}}\n", i)
	}
	dir := testobj.WriteFiles(t, map[string]string{"many.yaml": b.String()})
	_, errOut, err := runAudit(t, cli.AuditFlags{Files: []string{dir}, Output: "json"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"auditing 1500 objects", "10% (150 of 1500 objects)", "100% (1500 of 1500 objects)"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

// TestAuditWithoutNodesJudgesNodeAffinity: a dump of volumes, claims and classes holds no Node
// objects, so node affinity is judged by what every kubelet sets on its Node (its name as
// kubernetes.io/hostname): a claim scheduled to node-1 bound to a volume pinned to node-2 is
// reported, and saying so; once the volume is pinned to node-1 it is not.
func TestAuditWithoutNodesJudgesNodeAffinity(t *testing.T) {
	dump, err := os.ReadFile(filepath.Join("testdata", "audit-no-nodes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pvg009 := func(t *testing.T, manifest string) []audit.Finding {
		t.Helper()
		out, errOut, err := runAudit(t, cli.AuditFlags{Files: []string{testobj.WriteFiles(t, map[string]string{"dump.yaml": manifest})}, Output: "json"})
		if err != nil || errOut != "" {
			t.Fatalf("audit: %v, stderr %q", err, errOut)
		}
		var report audit.Report
		if err := json.Unmarshal([]byte(out), &report); err != nil {
			t.Fatalf("json output: %v\n%s", err, out)
		}
		if report.Summary.Objects != 5 {
			t.Fatalf("%d objects audited, want the dump's 5", report.Summary.Objects)
		}
		var found []audit.Finding
		for _, f := range report.Findings {
			if f.Rule == "PVG009" {
				found = append(found, f)
			}
		}
		return found
	}

	found := pvg009(t, string(dump))
	if len(found) != 1 || found[0].Namespace != "team-a" || found[0].Object != "on-node-2" ||
		!strings.Contains(found[0].Message.String(), "(Node node-1 not found; judged by the labels every kubelet sets: kubernetes.io/hostname=node-1)") {
		t.Fatalf("PVG009 findings %+v, want one on team-a/on-node-2 saying what was assumed", found)
	}

	pinnedHere := strings.Replace(string(dump), "            - node-2\n", "            - node-1\n", 1)
	if pinnedHere == string(dump) {
		t.Fatal("the dump no longer pins pv-node-2 to node-2")
	}
	if found := pvg009(t, pinnedHere); len(found) != 0 {
		t.Fatalf("PVG009 findings %+v for volumes pinned to the claims' host", found)
	}
}
