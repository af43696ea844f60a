package policy

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// credentialWords mark an attribute key as a likely credential, matched case-insensitively
// anywhere in the key.
var credentialWords = []string{"keyring", "password", "passwd", "token", "secret", "credential"}

// secretReferenceSuffixes mark keys that name a Secret rather than hold one (azurefile's and
// blob's secretName/secretNamespace): pointing at a Secret is the fix, not the problem.
var secretReferenceSuffixes = []string{"secretname", "secretnamespace"}

func pvg016SecretsInAttributes() Rule {
	return Rule{
		ID:      "PVG016",
		Name:    "secrets-in-attributes",
		Default: ActionWarn,
		Kinds:   []Kind{KindPersistentVolume},
		Summary: "CSI volumeAttributes hold no credentials (keys like keyring, password, token, secret); values are never reported",
		Check: func(r *Review, _ View, _ *Config) ([]Finding, error) {
			if r.PV == nil {
				return nil, nil
			}
			attrs := csiAttributes(r.PV)
			if r.OldPV != nil && maps.Equal(csiAttributes(r.OldPV), attrs) {
				return nil, nil
			}
			// Messages carry only the key: PV objects, warnings and reports are readable by far
			// more people than the credential was meant for.
			var out []Finding
			for _, key := range slices.Sorted(maps.Keys(attrs)) {
				if !credentialKey(key) {
					continue
				}
				out = append(out, Finding{
					Object: pvRef(r.PV),
					Field:  fmt.Sprintf("spec.csi.volumeAttributes[%s]", key),
					Message: fmt.Sprintf("%s has CSI volume attribute %q, which looks like a credential; volume attributes are readable by anyone who may read PersistentVolumes",
						pvRef(r.PV), key),
					Hint: "move it to a Secret referenced by spec.csi.nodeStageSecretRef or spec.csi.nodePublishSecretRef",
				})
			}
			return out, nil
		},
	}
}

func csiAttributes(pv *corev1.PersistentVolume) map[string]string {
	if pv.Spec.CSI == nil {
		return nil
	}
	return pv.Spec.CSI.VolumeAttributes
}

func credentialKey(key string) bool {
	k := strings.ToLower(key)
	for _, s := range secretReferenceSuffixes {
		if strings.HasSuffix(k, s) {
			return false
		}
	}
	for _, w := range credentialWords {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}
