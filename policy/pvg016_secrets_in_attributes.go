package policy

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

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
		Judges:  JudgesState,
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
			// Most volumes have no such key; only those that do pay for sorting the keys.
			if !anyCredentialKey(attrs) {
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
					Message: Textf("%s has CSI volume attribute %q, which looks like a credential; volume attributes are readable by anyone who may read PersistentVolumes",
						pvRef(r.PV), Word(key)),
					Hint:  Plain("move it to a Secret referenced by spec.csi.nodeStageSecretRef or spec.csi.nodePublishSecretRef"),
					fixes: []Fix{clearing(pvRef(r.PV), fmt.Sprintf("spec.csi.volumeAttributes[%s]", key))},
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

func anyCredentialKey(attrs map[string]string) bool {
	for key := range attrs {
		if credentialKey(key) {
			return true
		}
	}
	return false
}

// credentialKey reports whether a key looks like a credential, case-insensitively. ASCII keys
// (all real ones) are compared letter by letter without lowering a copy of the key.
func credentialKey(key string) bool {
	for i := range len(key) {
		if key[i] >= utf8.RuneSelf {
			key = strings.ToLower(key)
			break
		}
	}
	for _, s := range secretReferenceSuffixes {
		if len(key) >= len(s) && equalFoldASCII(key[len(key)-len(s):], s) {
			return false
		}
	}
	for _, w := range credentialWords {
		for i := 0; i+len(w) <= len(key); i++ {
			if equalFoldASCII(key[i:i+len(w)], w) {
				return true
			}
		}
	}
	return false
}

// equalFoldASCII reports whether s equals lower, a lower-case ASCII word, ignoring the case of
// s's ASCII letters.
func equalFoldASCII(s, lower string) bool {
	for i := range len(lower) {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}
