package cli

import (
	"math"

	"runtime/debug"
	"testing"

	"github.com/go-logr/logr"
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

func TestGCPercent(t *testing.T) {
	for _, tc := range []struct {
		name, gogc string
		flag, want int
		wantErr    bool
	}{
		{name: "default", flag: defaultGCPercent, want: defaultGCPercent},
		{name: "given", flag: 50, want: 50},
		{name: "Go's default given", flag: 100, want: 100},
		{name: "GOGC wins", flag: 50, gogc: "200", want: 0},
		{name: "GOGC off wins", flag: 50, gogc: "off", want: 0},
		{name: "too low", flag: minGCPercent - 1, wantErr: true},
		{name: "negative", flag: -1, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := gcPercent(tc.flag, tc.gogc)
			if (err != nil) != tc.wantErr {
				t.Fatalf("gcPercent(%d, %q) error = %v, want error %v", tc.flag, tc.gogc, err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("gcPercent(%d, %q) = %d, want %d", tc.flag, tc.gogc, got, tc.want)
			}
		})
	}
}

// TestApplyGCPercent: the flag sets the collector's percentage unless GOGC is set.
func TestApplyGCPercent(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	if err := applyGCPercent(40, "", logr.Discard()); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(100); got != 40 {
		t.Errorf("GC percent %d, want 40", got)
	}
	if err := applyGCPercent(40, "100", logr.Discard()); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set, GC percent %d, want it unchanged (100)", got)
	}
}
