package storage_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/storage"
)

func TestMadeFor(t *testing.T) {
	const uid = "0f5c3f5e-6b0a-4c47-9d43-7c2f2b1e9a10"
	cases := []struct {
		name string
		want types.UID
	}{
		{"prime-" + uid, uid},
		{"tmp-pvc-" + uid, uid},
		{"tmp-source-pvc-" + uid, uid},
		{uid, ""},           // no prefix: the claim's own name, not one made for another
		{"prime" + uid, ""}, // no separator
		{"prime-0F5C3F5E-6B0A-4C47-9D43-7C2F2B1E9A10", ""}, // the apiserver writes uids in lower case
		{"prime-0f5c3f5e-6b0a-4c47-9d43-7c2f2b1e9a1", ""},  // one character short
		{"prime-0f5c3f5e06b0a-4c47-9d43-7c2f2b1e9a10", ""}, // a dash missing
		{"prime-0f5c3f5e-6b0a-4c47-9d43-7c2f2b1e9a1g", ""}, // not hexadecimal
		{"data", ""},
		{"", ""},
	}
	for _, c := range cases {
		if got := storage.MadeFor(c.name); got != c.want {
			t.Errorf("MadeFor(%q) = %q, want %q", c.name, got, c.want)
		}
	}
}
