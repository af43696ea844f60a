package policytest_test

import (
	"context"
	"errors"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pvguard/pvguard/internal/policytest"
	"github.com/pvguard/pvguard/test/testobj"
)

// fixtures is a small cluster: a bound pair, a free volume and a Pending claim of another mode.
const fixtures = `
apiVersion: v1
kind: List
items:
- apiVersion: storage.k8s.io/v1
  kind: StorageClass
  metadata: {name: manual}
  provisioner: kubernetes.io/no-provisioner
- apiVersion: v1
  kind: PersistentVolumeClaim
  metadata:
    namespace: team-a
    name: data
    uid: uid-data
    annotations: {pv.kubernetes.io/bind-completed: "yes", pv.kubernetes.io/bound-by-controller: "yes"}
    finalizers: [kubernetes.io/pvc-protection]
  spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}, storageClassName: manual, volumeName: pv-data}
  status: {phase: Bound}
- apiVersion: v1
  kind: PersistentVolume
  metadata: {name: pv-data, finalizers: [kubernetes.io/pv-protection]}
  spec:
    accessModes: [ReadWriteOnce]
    capacity: {storage: 1Gi}
    claimRef: {apiVersion: v1, kind: PersistentVolumeClaim, namespace: team-a, name: data, uid: uid-data}
    hostPath: {path: /data}
    storageClassName: manual
  status: {phase: Bound}
- apiVersion: v1
  kind: PersistentVolume
  metadata: {name: pv-free}
  spec: {accessModes: [ReadWriteOnce], capacity: {storage: 1Gi}, hostPath: {path: /free}, storageClassName: manual, volumeMode: Block}
  status: {phase: Available}
- apiVersion: v1
  kind: PersistentVolumeClaim
  metadata: {namespace: team-a, name: logs, uid: uid-logs}
  spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}, storageClassName: manual}
  status: {phase: Pending}
`

// suite makes a suite over the fixtures above with the given cases (YAML, indented as items of
// cases:) and extra top-level fields.
func suite(extra, cases string) string {
	return "apiVersion: pvguard.io/v1alpha1\nkind: PolicyTest\nfixtures:\n  files: [cluster.yaml]\n" + extra + "cases:\n" + cases
}

const steal = `
- name: steal
  write:
    operation: UPDATE
    user: mallory
    oldFixture: PersistentVolume/pv-data
    patch: {spec: {claimRef: {name: logs, uid: uid-logs}}}
`

func TestStrictReading(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		// want matches the one error, which must name the file, the document and the field.
		want string
		// suites is how many suites of the file are read all the same.
		suites int
	}{
		{
			name:  "unknown field of a case",
			files: map[string]string{"s.yaml": suite("", steal+"  expect: {denyed: [PVG002]}\n")},
			want:  `s\.yaml: document 1: unknown field "cases\[0\]\.expect\.denyed"`,
		},
		{
			name:  "unknown top-level field",
			files: map[string]string{"s.yaml": suite("fixturez: {}\n", steal+"  expect: {denied: [PVG002]}\n")},
			want:  `s\.yaml: document 1: unknown field "fixturez"`,
		},
		{
			name:  "repeated key",
			files: map[string]string{"s.yaml": suite("", steal+"    user: alice\n  expect: {denied: [PVG002]}\n")},
			want:  `s\.yaml: document 1: duplicate field "cases\[0\]\.write\.user"`,
		},
		{
			name: "repeated key in JSON",
			files: map[string]string{"s.json": `{"apiVersion": "pvguard.io/v1alpha1", "kind": "PolicyTest", "cases": [` +
				`{"name": "a", "name": "b", "audit": {"exact": true}}]}`},
			want: `s\.json: document 1: duplicate field "cases\[0\]\.name"`,
		},
		{
			name:  "unknown field in the object written",
			files: map[string]string{"s.yaml": suite("", strings.Replace(steal, "    oldFixture: PersistentVolume/pv-data\n", "    oldObject: {apiVersion: v1, kind: PersistentVolume, metadata: {name: pv-data}, spec: {capacty: {}}}\n", 1)+"  expect: {denied: [PVG002]}\n")},
			want:  `^s\.yaml: document 1: cases\[0\]\.write\.oldObject: PersistentVolume pv-data: unknown field "spec\.capacty"$`,
		},
		{
			name:  "unknown field in the object written, of a claim",
			files: map[string]string{"s.yaml": suite("", "- name: c\n  write: {operation: CREATE, user: alice, object: {apiVersion: v1, kind: PersistentVolumeClaim, metadata: {namespace: ns, name: c}, spec: {volumeNam: x}}}\n  expect: {allowed: true}\n")},
			want:  `^s\.yaml: document 1: cases\[0\]\.write\.object: PersistentVolumeClaim ns/c: unknown field "spec\.volumeNam"$`,
		},
		{
			name:  "an object written without kind",
			files: map[string]string{"s.yaml": suite("", "- name: c\n  write: {operation: CREATE, user: alice, object: {apiVersion: v1, metadata: {namespace: ns, name: c}}}\n  expect: {allowed: true}\n")},
			want:  `^s\.yaml: document 1: cases\[0\]\.write\.object: no kind \(want `,
		},
		{
			name:  "wrong kind",
			files: map[string]string{"s.yaml": "apiVersion: pvguard.io/v1alpha1\nkind: PolicyTests\ncases: []\n"},
			want:  `s\.yaml: document 1: apiVersion "pvguard\.io/v1alpha1" kind "PolicyTests": want apiVersion pvguard\.io/v1alpha1, kind PolicyTest`,
		},
		{
			name:   "wrong apiVersion, second document",
			files:  map[string]string{"s.yaml": suite("", "- name: a\n  audit: {exact: true}\n") + "---\napiVersion: pvguard.io/v2\nkind: PolicyTest\n"},
			want:   `s\.yaml: document 2: apiVersion "pvguard\.io/v2" kind "PolicyTest": want`,
			suites: 1,
		},
		{
			name:  "kind PolicyTest without apiVersion",
			files: map[string]string{"s.yaml": "kind: PolicyTest\ncases: []\n"},
			want:  `s\.yaml: document 1: apiVersion "" kind "PolicyTest": want apiVersion pvguard\.io/v1alpha1, kind PolicyTest`,
		},
		{
			name:  "kind PolicyTest of a misspelled group",
			files: map[string]string{"s.yaml": "apiVersion: pvgaurd.io/v1alpha1\nkind: PolicyTest\ncases: []\n"},
			want:  `s\.yaml: document 1: apiVersion "pvgaurd\.io/v1alpha1" kind "PolicyTest": want`,
		},
		{
			name:  "kind PolicyTest without apiVersion in JSON",
			files: map[string]string{"s.json": `{"kind": "PolicyTest", "cases": []}`},
			want:  `s\.json: document 1: apiVersion "" kind "PolicyTest": want`,
		},
		{
			name:  "kind PolicyTest in a document that is no YAML",
			files: map[string]string{"s.yaml": "kind: PolicyTest\ncases: [a\n"},
			want:  `s\.yaml: document 1: `,
		},
		{
			name:  "a fixture of a kind pvguard does not read",
			files: map[string]string{"s.yaml": suite("", "- name: a\n  audit: {exact: true}\n"), "extra.yaml": "", "cluster.yaml": fixtures + "- {apiVersion: v1, kind: Secret, metadata: {name: s}}\n"},
			want:  `cluster\.yaml: document 1: items\[5\]: apiVersion "v1" kind "Secret" is not what pvguard reads here`,
		},
		{
			name:  "unknown field in a fixture file",
			files: map[string]string{"s.yaml": suite("", "- name: a\n  audit: {exact: true}\n"), "cluster.yaml": fixtures + "- {apiVersion: v1, kind: Node, metadata: {name: node-z}, spec: {podCIDRz: x}}\n"},
			want:  `cluster\.yaml: document 1: items\[5\]: Node node-z: unknown field "spec\.podCIDRz"`,
		},
		{
			name:  "a fixture given twice",
			files: map[string]string{"s.yaml": suite("", "- name: a\n  audit: {exact: true}\n"), "cluster.yaml": fixtures + "- {apiVersion: v1, kind: PersistentVolumeClaim, metadata: {name: logs, namespace: team-a}}\n"},
			want:  `s\.yaml: document 1: fixture PersistentVolumeClaim/team-a/logs is given twice`,
		},
		{
			name:  "a missing fixture file",
			files: map[string]string{"s.yaml": "apiVersion: pvguard.io/v1alpha1\nkind: PolicyTest\nfixtures: {files: [nope.yaml]}\ncases:\n- name: a\n  audit: {exact: true}\n"},
			want:  `s\.yaml: document 1: fixtures\.files: .*nope\.yaml: no such file`,
		},
		{
			name:  "a reference to no fixture",
			files: map[string]string{"s.yaml": suite("", strings.Replace(steal, "pv-data", "pv-nope", 1)+"  expect: {denied: [PVG002]}\n")},
			want:  `s\.yaml: document 1: cases\[0\]\.write: there is no fixture PersistentVolume/pv-nope`,
		},
		{
			name:  "an unknown rule",
			files: map[string]string{"s.yaml": suite("", steal+"  expect: {denied: [PVG999]}\n")},
			want:  `s\.yaml: document 1: cases\[0\]\.expect\.denied\[0\]: "PVG999" is not a rule ID`,
		},
		{
			name:  "an expectation that says nothing",
			files: map[string]string{"s.yaml": suite("", steal+"  expect: {message: x}\n")},
			want:  `cases\[0\]\.expect: say what pvguard answers`,
		},
		{
			name:  "a write without expect",
			files: map[string]string{"s.yaml": suite("", steal)},
			want:  `cases\[0\]\.expect: a write case says what pvguard answers`,
		},
		{
			name:  "a bad operation",
			files: map[string]string{"s.yaml": suite("", strings.Replace(steal, "UPDATE", "PATCH", 1)+"  expect: {denied: [PVG002]}\n")},
			want:  `cases\[0\]\.write\.operation: "PATCH": want CREATE, UPDATE or DELETE`,
		},
		{
			name:  "a CREATE with an old object",
			files: map[string]string{"s.yaml": suite("", strings.Replace(steal, "UPDATE", "CREATE", 1)+"  expect: {denied: [PVG002]}\n")},
			want:  `cases\[0\]\.write: a CREATE has no old object`,
		},
		{
			name:  "a DELETE that writes an object",
			files: map[string]string{"s.yaml": suite("", strings.Replace(steal, "UPDATE", "DELETE", 1)+"  expect: {denied: [PVG002]}\n")},
			want:  `cases\[0\]\.write: a DELETE writes no object`,
		},
		{
			name:  "an UPDATE that writes nothing",
			files: map[string]string{"s.yaml": suite("", strings.Replace(steal, "    patch: {spec: {claimRef: {name: logs, uid: uid-logs}}}\n", "", 1)+"  expect: {denied: [PVG002]}\n")},
			want:  `cases\[0\]\.write: an UPDATE writes an object \(object or patch\)`,
		},
		{
			name:  "no requester",
			files: map[string]string{"s.yaml": suite("", strings.Replace(steal, "    user: mallory\n", "", 1)+"  expect: {denied: [PVG002]}\n")},
			want:  `cases\[0\]\.write: who writes`,
		},
		{
			name:  "a bad regular expression",
			files: map[string]string{"s.yaml": suite("", steal+"  expect: {denied: [PVG002], message: '(('}\n")},
			want:  `cases\[0\]\.expect\.message: error parsing regexp`,
		},
		{
			name:  "a bad policy config",
			files: map[string]string{"s.yaml": suite("config: {rules: {PVG999: {action: off}}}\n", "- name: a\n  audit: {exact: true}\n")},
			want:  `s\.yaml: document 1: config: .*PVG999`,
		},
		{
			name:  "an unknown field of the policy config",
			files: map[string]string{"s.yaml": suite("config: {rules: {PVG001: {actoin: off}}}\n", "- name: a\n  audit: {exact: true}\n")},
			want:  `^s\.yaml: document 1: config: parsing policy config: unknown field "rules\.PVG001\.actoin"$`,
		},
		{
			name:  "an unknown field of the policy config file",
			files: map[string]string{"s.yaml": suite("configFile: p.yaml\n", "- name: a\n  audit: {exact: true}\n"), "p.yaml": "rules:\n  PVG001: {actoin: off}\n"},
			want:  `^s\.yaml: document 1: configFile: loading policy config .*p\.yaml: parsing policy config: unknown field "rules\.PVG001\.actoin"$`,
		},
		{
			name:  "two cases of one name",
			files: map[string]string{"s.yaml": suite("", "- name: a\n  audit: {exact: true}\n- name: a\n  audit: {exact: true}\n")},
			want:  `cases\[1\]\.name: "a" is also the name of cases\[0\]`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"cluster.yaml": fixtures}
			for k, v := range tc.files {
				files[k] = v
			}
			dir := testobj.WriteFiles(t, files)
			suites, errs := policytest.Load([]string{dir})
			if len(errs) != 1 {
				t.Fatalf("errors %v, want one matching %s", errs, tc.want)
			}
			msg := strings.ReplaceAll(errs[0].Error(), dir+string(filepath.Separator), "")
			if !regexp.MustCompile(tc.want).MatchString(msg) {
				t.Errorf("error %q does not match %s", msg, tc.want)
			}
			if len(suites) != tc.suites {
				t.Errorf("%d suites read, want %d: a suite with an error is not run", len(suites), tc.suites)
			}
		})
	}
}

// TestUpdateOldObjectFromFixture: an UPDATE that gives only the object written is judged against
// the fixture of that name as its old object.
func TestUpdateOldObjectFromFixture(t *testing.T) {
	dir := testobj.WriteFiles(t, map[string]string{"cluster.yaml": fixtures, "s.yaml": suite("", `
- name: label the free volume
  write:
    operation: UPDATE
    user: admin
    object: {apiVersion: v1, kind: PersistentVolume, metadata: {name: pv-free, labels: {app: x}}, spec: {accessModes: [ReadWriteOnce], capacity: {storage: 1Gi}, hostPath: {path: /free}, storageClassName: manual, volumeMode: Block}}
  expect: {allowed: true}
`)})
	suites, errs := policytest.Load([]string{dir})
	if len(errs) != 0 || len(suites) != 1 {
		t.Fatalf("got %d suites, errors %v; want the one suite", len(suites), errs)
	}
	w := suites[0].Cases[0].Write
	if w.OldFixture != "PersistentVolume/pv-free" || !strings.Contains(string(w.OldObject), `"path":"/free"`) {
		t.Errorf("old fixture %q, old object %s: want the fixture PersistentVolume/pv-free", w.OldFixture, w.OldObject)
	}
}

// TestSuiteFilesFound: a directory's fixture and config files are not suites; a file named
// directly must be one.
func TestSuiteFilesFound(t *testing.T) {
	dir := testobj.WriteFiles(t, map[string]string{
		"cluster.yaml": fixtures,
		"policy.yaml":  "rules: {PVG010: {action: deny}}\n",
		"sub/s.yaml":   strings.Replace(suite("configFile: ../policy.yaml\n", "- name: a\n  audit: {exact: true}\n"), "[cluster.yaml]", "[../cluster.yaml]", 1),
	})
	suites, errs := policytest.Load([]string{dir})
	if len(errs) != 0 || len(suites) != 1 {
		t.Fatalf("got %d suites, errors %v; want the one suite", len(suites), errs)
	}
	// A fixture that names pvguard.io in an annotation, or PolicyTest in a value, is no suite.
	dir = testobj.WriteFiles(t, map[string]string{
		"cluster.yaml": fixtures,
		"more.yaml":    "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: pv-x, annotations: {pvguard.io/note: PolicyTest}}\nspec: {capacity: {storage: 1Gi}, hostPath: {path: /x}}\n",
		"s.yaml":       suite("", "- name: a\n  audit: {exact: true}\n"),
	})
	if suites, errs = policytest.Load([]string{dir}); len(errs) != 0 || len(suites) != 1 {
		t.Fatalf("got %d suites, errors %v; want the one suite", len(suites), errs)
	}
	_, errs = policytest.Load([]string{filepath.Join(dir, "cluster.yaml")})
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), `apiVersion "v1" kind "List": want apiVersion pvguard.io/v1alpha1, kind PolicyTest`) {
		t.Errorf("a fixture file named as a suite: errors %v", errs)
	}
}

// run loads one suite file and runs it.
func run(t *testing.T, files map[string]string, o policytest.Options) policytest.Report {
	t.Helper()
	if _, ok := files["cluster.yaml"]; !ok {
		files["cluster.yaml"] = fixtures
	}
	dir := testobj.WriteFiles(t, files)
	suites, errs := policytest.Load([]string{dir})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return policytest.Run(context.Background(), suites, o)
}

func TestExpectations(t *testing.T) {
	for _, tc := range []struct {
		name string
		// extra are top-level fields of the suite, cases its cases.
		extra, cases string
		// failure matches the case's failure; "" for a case that must pass.
		failure string
	}{
		{name: "denied, as expected", cases: steal + "  expect: {denied: [PVG002]}\n"},
		{name: "denied, expected allowed", cases: steal + "  expect: {allowed: true}\n",
			failure: `^expected allowed, got denied \[PVG002\]: \[PVG002 claimref-uid-consistent\] PersistentVolume pv-data`},
		{name: "denied by another rule", cases: steal + "  expect: {denied: [PVG004]}\n", failure: `^expected denied \[PVG004\], got denied \[PVG002\]`},
		{name: "denied, with a message that matches", cases: steal + "  expect: {denied: [PVG002], message: 'claimed by the live PersistentVolumeClaim team-a/data'}\n"},
		{name: "denied, with a message that does not match", cases: steal + "  expect: {denied: [PVG002], message: 'no such words'}\n",
			failure: `^denied \[PVG002\] as expected, but no message matches "no such words"`},
		{name: "allowed, as expected", cases: `
- name: pre-bind
  write:
    operation: UPDATE
    user: admin
    oldFixture: PersistentVolume/pv-free
    patch: {spec: {volumeMode: Filesystem, claimRef: {namespace: team-a, name: logs}}}
  expect: {allowed: true}
`},
		{name: "allowed, expected denied", cases: `
- name: pre-bind
  write:
    operation: UPDATE
    user: admin
    oldFixture: PersistentVolume/pv-free
    patch: {spec: {volumeMode: Filesystem, claimRef: {namespace: team-a, name: logs}}}
  expect: {denied: [PVG002]}
`, failure: `^expected denied \[PVG002\], got allowed$`},
		{name: "warned, as expected", cases: grab + "  expect: {warned: [PVG010]}\n"},
		{name: "warned, expected allowed", cases: grab + "  expect: {allowed: true}\n", failure: `^expected allowed, got warned \[PVG010\]: \[PVG010 volume-grab\]`},
		{name: "warned, expected denied and warned", cases: grab + "  expect: {denied: [PVG001], warned: [PVG010]}\n", failure: `^expected denied \[PVG001\] warned \[PVG010\], got warned \[PVG010\]`},
		{name: "warned under a config that denies", extra: "config: {rules: {volume-grab: {action: deny}}}\n", cases: grab + "  expect: {denied: [PVG010]}\n"},
		{name: "audited, as expected", cases: bound + "  expect: {allowed: true, audited: [PVG015]}\n"},
		{name: "audited, expected none", cases: bound + "  expect: {allowed: true, audited: []}\n", failure: `^expected audited \[\], got audited \[PVG015\]`},
		{name: "exempt requester", extra: "config: {exemptions: {users: [mallory]}}\n", cases: steal + "  expect: {allowed: true}\n"},

		{name: "audit finds what is expected", extra: "fixtures: {files: [cluster.yaml, drift.yaml]}\n", cases: `
- name: audit
  audit:
    findings: [{rule: PVG024, object: PersistentVolume/pv-failed, action: audit, message: 'PersistentVolume pv-failed is Failed'}]
`},
		{name: "audit, exact", extra: "fixtures: {files: [cluster.yaml, drift.yaml]}\n", cases: "- name: audit\n  audit: {exact: true, findings: [{rule: PVG024}]}\n"},
		{name: "audit misses a finding", cases: "- name: audit\n  audit: {findings: [{rule: PVG024, object: PersistentVolume/pv-failed}]}\n",
			failure: `^expected a finding PVG024 on PersistentVolume/pv-failed, got none; the audit found: none$`},
		{name: "audit finds something else", extra: "fixtures: {files: [cluster.yaml, drift.yaml]}\n", cases: "- name: audit\n  audit: {exact: true}\n",
			failure: `^unexpected finding PVG024 on PersistentVolume/pv-failed \(audit\): \[PVG024 failed-volume\]`},
		{name: "audit, wrong object", extra: "fixtures: {files: [cluster.yaml, drift.yaml]}\n", cases: "- name: audit\n  audit: {findings: [{rule: PVG024, object: PersistentVolume/pv-data}]}\n",
			failure: `the audit found: PVG024 on PersistentVolume/pv-failed \(audit\)$`},

		{name: "explain, as expected", cases: `
- name: explain
  explain:
    claim: team-a/logs
    waitingFor: nothing
    volume: ""
    closest: pv-free
    verdict: 'pv-free fits if'
    candidates: [{volume: pv-free, fits: false, failing: [volumeMode]}, {volume: pv-data, failing: [phase, claimRef]}]
`},
		{name: "explain, wrong check", cases: "- name: explain\n  explain: {claim: team-a/logs, candidates: [{volume: pv-free, failing: [capacity]}]}\n",
			failure: `^expected volume pv-free failing \[capacity\], got \[volumeMode \(Block != Filesystem\)\]$`},
		{name: "explain, wrong verdict", cases: "- name: explain\n  explain: {claim: team-a/logs, volume: pv-free}\n",
			failure: `^expected the verdict to give volume pv-free, got none`},
		{name: "explain, wrong state", cases: "- name: explain\n  explain: {claim: team-a/logs, waitingFor: binder}\n",
			failure: `^expected waitingFor binder, got nothing`},
		{name: "explain, a bound claim", cases: "- name: explain\n  explain: {claim: team-a/data, volume: pv-data, state: 'bound to volume pv-data'}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := suite(tc.extra, tc.cases)
			if strings.Contains(tc.extra, "fixtures:") {
				s = strings.Replace(s, "fixtures:\n  files: [cluster.yaml]\n", "", 1)
			}
			rep := run(t, map[string]string{"s.yaml": s, "drift.yaml": drift}, policytest.Options{})
			if rep.Cases != 1 {
				t.Fatalf("%d cases ran, want 1", rep.Cases)
			}
			c := rep.Suites[0].Cases[0]
			switch {
			case tc.failure == "" && !c.Passed:
				t.Errorf("failed: %s", c.Failure)
			case tc.failure != "" && c.Passed:
				t.Errorf("passed; want a failure matching %s", tc.failure)
			case tc.failure != "" && !regexp.MustCompile(tc.failure).MatchString(c.Failure):
				t.Errorf("failure %q does not match %s", c.Failure, tc.failure)
			}
		})
	}
}

const grab = `
- name: grab
  write:
    operation: CREATE
    user: alice
    object:
      apiVersion: v1
      kind: PersistentVolumeClaim
      metadata: {namespace: team-a, name: grab}
      spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}, storageClassName: manual, volumeMode: Block, volumeName: pv-free}
`

const bound = `
- name: bound without a claim
  write:
    operation: UPDATE
    subResource: status
    serviceAccount: kube-system/persistent-volume-binder
    oldFixture: PersistentVolume/pv-free
    patch: {status: {phase: Bound}}
`

const drift = `
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-failed}
spec: {accessModes: [ReadWriteOnce], capacity: {storage: 1Gi}, hostPath: {path: /failed}, storageClassName: manual}
status: {phase: Failed}
`

// TestSequential: in a sequential suite each admitted write is stored before the next case, and
// a refused or dry-run write is not.
func TestSequential(t *testing.T) {
	cases := `
- name: a dry run of the grab
  write:
    operation: CREATE
    user: alice
    dryRun: true
    object: {apiVersion: v1, kind: PersistentVolumeClaim, metadata: {namespace: team-a, name: grab}, spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}, storageClassName: manual, volumeMode: Block, volumeName: pv-free}}
  expect: {warned: [PVG010]}
- name: the dry run stored nothing
  explain: {claim: team-a/logs, closest: pv-free}
` + steal + `  expect: {denied: [PVG002]}
- name: the refused write stored nothing
  explain: {claim: team-a/data, volume: pv-data}
- name: the grab
  write:
    operation: CREATE
    user: alice
    object: {apiVersion: v1, kind: PersistentVolumeClaim, metadata: {namespace: team-a, name: grab}, spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}, storageClassName: manual, volumeMode: Block, volumeName: pv-free}}
  expect: {warned: [PVG010]}
- name: a claim of the same name cannot be judged as new again, it is stored
  write:
    operation: UPDATE
    user: alice
    oldFixture: PersistentVolumeClaim/team-a/grab
    patch: {metadata: {labels: {app: x}}}
  expect: {allowed: true}
- name: deleting the claim marks it deleted, its finalizer holds it
  write:
    operation: DELETE
    user: alice
    oldFixture: PersistentVolumeClaim/team-a/grab
  expect: {allowed: true}
- name: once its finalizer is removed, the claim is gone
  write:
    operation: UPDATE
    serviceAccount: kube-system/pvc-protection-controller
    oldFixture: PersistentVolumeClaim/team-a/grab
    patch: {metadata: {finalizers: null}}
  expect: {allowed: true}
- name: nothing is left of it
  write:
    operation: UPDATE
    user: alice
    oldFixture: PersistentVolumeClaim/team-a/grab
    patch: {metadata: {labels: {app: y}}}
  expect: {allowed: true}
`
	rep := run(t, map[string]string{"s.yaml": suite("sequential: true\n", cases)}, policytest.Options{})
	want := map[string]string{"nothing is left of it": "the case cannot run: there is no fixture PersistentVolumeClaim/team-a/grab"}
	for _, c := range rep.Suites[0].Cases {
		if w, ok := want[c.Name]; ok {
			if c.Passed || !strings.Contains(c.Failure, w) {
				t.Errorf("%s: failure %q, want %q", c.Name, c.Failure, w)
			}
			continue
		}
		if !c.Passed {
			t.Errorf("%s: %s", c.Name, c.Failure)
		}
	}

	// --run selects what is reported; the cases before a selected one still run.
	rep = run(t, map[string]string{"s.yaml": suite("sequential: true\n", cases)}, policytest.Options{Run: regexp.MustCompile("^deleting")})
	if rep.Cases != 1 || !rep.Suites[0].Cases[0].Passed {
		t.Errorf("--run: %+v", rep)
	}
}

func TestRunSelects(t *testing.T) {
	rep := run(t, map[string]string{"s.yaml": suite("", steal+"  expect: {denied: [PVG002]}\n"+grab+"  expect: {allowed: true}\n")},
		policytest.Options{Run: regexp.MustCompile("^st")})
	if rep.Cases != 1 || rep.Passed != 1 || rep.Suites[0].Cases[0].Name != "steal" {
		t.Errorf("got %+v, want steal alone, passed", rep)
	}
}

func TestTextReport(t *testing.T) {
	rep := run(t, map[string]string{"s.yaml": suite("", steal+"  expect: {allowed: true}\n"+grab+"  expect: {warned: [PVG010]}\n")}, policytest.Options{})
	var b strings.Builder
	if err := policytest.WriteText(&b, rep, nil, true); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("report:\n%s", b.String())
	}
	for i, want := range []string{
		`^--- FAIL: .*s\.yaml: steal: expected allowed, got denied \[PVG002\]: \[PVG002 `,
		`^--- PASS: .*s\.yaml: grab \(warned \[PVG010\]\)$`,
		`^FAIL\t1 suite, 2 cases: 1 failed, 1 passed \(`,
	} {
		if !regexp.MustCompile(want).MatchString(lines[i]) {
			t.Errorf("line %d %q does not match %s", i+1, lines[i], want)
		}
	}
}
