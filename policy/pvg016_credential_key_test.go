package policy

import (
	"strings"
	"testing"
)

// TestCredentialKeyMatchesLowercasedComparison: the letter-by-letter comparison decides as
// lowering the key and searching it would.
func TestCredentialKeyMatchesLowercasedComparison(t *testing.T) {
	reference := func(key string) bool {
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
	for _, key := range []string{
		"", "pool", "clusterID", "csi.storage.k8s.io/provisioner-secret-name", "adminKeyring", "userPASSWORD",
		"passwd", "Token", "api-token-file", "secretName", "SecretNamespace", "nodeStageSecret", "Credentials",
		"storage.kubernetes.io/csiProvisionerIdentity", "pass", "tok", "secretnam",
		"\u212Aeyring", // KELVIN SIGN lowers to an ASCII k
		"pässwörd", "Schlüssel-Token", "секрет",
	} {
		if got, want := credentialKey(key), reference(key); got != want {
			t.Errorf("credentialKey(%q) = %v, want %v", key, got, want)
		}
	}
}
