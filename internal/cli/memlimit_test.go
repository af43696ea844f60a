package cli

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name, limit, gomemlimit string
		want                    int64
		wantErr                 bool
	}{
		{name: "unset", want: 0},
		{name: "quantity", limit: "1Gi", want: 966367641},
		{name: "downward API bytes", limit: "536870912", want: 483183820},
		{name: "GOMEMLIMIT wins", limit: "1Gi", gomemlimit: "800MiB", want: 0},
		{name: "not a quantity", limit: "lots", wantErr: true},
		{name: "zero", limit: "0", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := memoryLimit(tc.limit, tc.gomemlimit)
			if (err != nil) != tc.wantErr {
				t.Fatalf("memoryLimit(%q, %q) error = %v, want error %v", tc.limit, tc.gomemlimit, err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("memoryLimit(%q, %q) = %d, want %d", tc.limit, tc.gomemlimit, got, tc.want)
			}
		})
	}
}

// TestLimitLocalReadMemory: the local read's soft limit is set unless GOMEMLIMIT is.
func TestLimitLocalReadMemory(t *testing.T) {
	before := debug.SetMemoryLimit(math.MaxInt64)
	defer debug.SetMemoryLimit(before)
	limitLocalReadMemory("")
	if got := debug.SetMemoryLimit(-1); got != localReadMemoryLimit {
		t.Errorf("limit %d, want %d", got, localReadMemoryLimit)
	}
	debug.SetMemoryLimit(math.MaxInt64)
	limitLocalReadMemory("1GiB")
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("with GOMEMLIMIT set, limit %d, want it unchanged", got)
	}
}
