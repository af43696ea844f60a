package policy_test

import (
	"strings"
	"testing"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/testobj"
)

// canary is a credential value that must never reach a finding.
const canary = "hunter2-CANARY-7f3a"

func TestPVG016SecretsInAttributes(t *testing.T) {
	pv := func(attrs map[string]string) testobj.PVMod { return testobj.CSI("csi.example.com", "vol-1", attrs) }
	claim := testobj.PVC("team-a", "data")
	leaky := testobj.PV("pv-7", pv(map[string]string{"clusterID": "c1", "adminPassword": canary}))
	bind := testobj.BindSteps(leaky, claim)

	runRuleCases(t, "PVG016", []ruleCase{
		{
			name:     "password attribute is warned",
			review:   pvCreate(admin, leaky),
			want:     []string{"spec.csi.volumeAttributes[adminPassword]"},
			wantText: `PersistentVolume pv-7 has CSI volume attribute "adminPassword", which looks like a credential; volume attributes are readable by anyone who may read PersistentVolumes; move it to a Secret referenced by spec.csi.nodeStageSecretRef or spec.csi.nodePublishSecretRef`,
		},
		{
			name: "every credential-like key is a finding, in key order, whatever its case",
			review: pvCreate(admin, testobj.PV("pv-7", pv(map[string]string{
				"userKeyring": canary, "PASSWD": canary, "authToken": canary, "clientSecret": canary,
				"credentials": canary, "pool": "rbd", "password": canary,
			}))),
			want: []string{
				"spec.csi.volumeAttributes[PASSWD]",
				"spec.csi.volumeAttributes[authToken]",
				"spec.csi.volumeAttributes[clientSecret]",
				"spec.csi.volumeAttributes[credentials]",
				"spec.csi.volumeAttributes[password]",
				"spec.csi.volumeAttributes[userKeyring]",
			},
		},
		{
			name:   "keys that name a Secret are the fix, not the problem",
			review: pvCreate(admin, testobj.PV("pv-7", pv(map[string]string{"secretName": "azure-creds", "secretNamespace": "kube-system"}))),
		},
		{
			name:   "ordinary attributes are allowed",
			review: pvCreate(admin, testobj.PV("pv-7", pv(map[string]string{"clusterID": "c1", "pool": "rbd", "imageFeatures": "layering"}))),
		},
		{
			name:   "volume that is not CSI is not judged",
			review: pvCreate(admin, testobj.PV("pv-7")),
		},
		{
			name:   "update that changes the attributes is judged",
			review: pvUpdate(admin, testobj.PV("pv-7", pv(map[string]string{"clusterID": "c1"})), leaky),
			want:   []string{"spec.csi.volumeAttributes[adminPassword]"},
		},
		{
			name:   "update that keeps the attributes is not judged",
			review: pvUpdate(admin, leaky, testobj.PVWith(leaky, testobj.PVMeta(testobj.Label("tier", "gold")))),
		},
		{
			name:   "binder write 1 (PV spec) on a leaky volume adds no warning",
			review: pvUpdate(binder, bind.PV, bind.PVSpec),
		},
		{
			name:   "binder write 2 (PV status) on a leaky volume adds no warning",
			review: pvStatus(binder, bind.PVSpec, bind.PVStatus),
		},
		{
			name: "external provisioner creating a clean volume is allowed",
			review: pvCreate(provisioner, testobj.PV("pvc-uid", testobj.ClaimRef("team-a", "data", string(claim.UID)),
				pv(map[string]string{"storage.kubernetes.io/csiProvisionerIdentity": "1700000000-csi.example.com"}))),
			config: provisionerConfig(),
		},
	})
}

// TestPVG016NeverReportsValues checks every rendering of every finding for the value.
func TestPVG016NeverReportsValues(t *testing.T) {
	r := pvCreate(admin, testobj.PV("pv-7", testobj.CSI("csi.example.com", "vol-1", map[string]string{
		"password": canary, "token": canary, "keyring": "[client.admin]\n\tkey = " + canary,
	})))
	d, err := policy.NewEngine(nil).Admit(r, testobj.NewView())
	if err != nil {
		t.Fatalf("Admit: %v", err)
	}
	all := append(append(append([]policy.Finding{}, d.Deny...), d.Warn...), d.Audit...)
	seen := 0
	for _, f := range all {
		if f.Rule == "PVG016" {
			seen++
		}
		for _, s := range []string{f.String(), f.Message.String(), f.Hint.String(), f.Field, f.Object.String()} {
			if strings.Contains(s, canary) {
				t.Errorf("%s finding leaks the attribute value: %q", f.Rule, s)
			}
		}
	}
	if seen != 3 {
		t.Errorf("got %d PVG016 findings, want 3", seen)
	}
}
