package cli

import (
	"strings"
	"testing"
	"time"
)

func TestLeaderElectionTimings(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr bool
	}{
		{args: nil},
		{args: []string{"--leader-elect-lease-duration=6s", "--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=1s"}},
		{args: []string{"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=4s"}, wantErr: true},
		{args: []string{"--leader-elect-retry-period=10s"}, wantErr: true},
		{args: []string{"--leader-elect-retry-period=0s"}, wantErr: true},
		{args: []string{"--leader-elect=false", "--leader-elect-retry-period=0s"}},
	} {
		o, err := ParseServeArgs(append([]string{"--self-signed"}, tc.args...))
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		err = o.validate()
		if (err != nil) != tc.wantErr || (err != nil && !strings.Contains(err.Error(), "--leader-elect-renew-deadline")) {
			t.Errorf("%v: validate() = %v, want error %v", tc.args, err, tc.wantErr)
		}
	}
	o, _ := ParseServeArgs([]string{"--self-signed"})
	if o.LeaseDuration != 15*time.Second || o.RenewDeadline != 10*time.Second || o.RetryPeriod != 2*time.Second {
		t.Errorf("defaults %s/%s/%s, want kube-controller-manager's 15s/10s/2s", o.LeaseDuration, o.RenewDeadline, o.RetryPeriod)
	}
}

func TestProfilingNeedsTheMetricsAddress(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr bool
	}{
		{args: []string{"--profiling"}, wantErr: true},
		{args: []string{"--profiling", "--metrics-listen=127.0.0.1:8080"}},
		{args: []string{"--metrics-listen=127.0.0.1:8080"}},
	} {
		o, err := ParseServeArgs(append([]string{"--self-signed"}, tc.args...))
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		err = o.validate()
		if (err != nil) != tc.wantErr || (err != nil && !strings.Contains(err.Error(), "--profiling needs --metrics-listen")) {
			t.Errorf("%v: validate() = %v, want error %v", tc.args, err, tc.wantErr)
		}
	}
}

// TestNoVolumeFitsAfter: --no-volume-fits-after defaults to 2m, 0 turns the event off, and a
// negative delay is refused by name.
func TestNoVolumeFitsAfter(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    time.Duration
		wantErr bool
	}{
		{want: 2 * time.Minute},
		{args: []string{"--no-volume-fits-after=0"}, want: 0},
		{args: []string{"--no-volume-fits-after=30s"}, want: 30 * time.Second},
		{args: []string{"--no-volume-fits-after=-1s"}, want: -time.Second, wantErr: true},
	} {
		o, err := ParseServeArgs(append([]string{"--self-signed"}, tc.args...))
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if o.NoVolumeFitsAfter != tc.want {
			t.Errorf("%v: NoVolumeFitsAfter %s, want %s", tc.args, o.NoVolumeFitsAfter, tc.want)
		}
		err = o.validate()
		if (err != nil) != tc.wantErr || (err != nil && !strings.Contains(err.Error(), "--no-volume-fits-after")) {
			t.Errorf("%v: validate() = %v, want an error naming the flag: %v", tc.args, err, tc.wantErr)
		}
	}
}
