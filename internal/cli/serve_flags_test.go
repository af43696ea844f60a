package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestServeFlagNamesAndDefaults: `pvguard serve` with no arguments has exactly these flags, at
// these values (what --help documents), however the options behind them are arranged.
func TestServeFlagNamesAndDefaults(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "pvguard-system")
	want := map[string]string{
		"access-burst":                     "40",
		"access-qps":                       "20",
		"admission-policy-params":          "",
		"admission-read-rights":            "auto",
		"audit-burst":                      "40",
		"audit-interval":                   "1m0s",
		"audit-qps":                        "20",
		"binder":                           "off",
		"binder-resync":                    "15s",
		"binder-workers":                   "8",
		"ca-overlap":                       "10m0s",
		"ca-validity":                      "87600h0m0s",
		"cert-check-interval":              "1m0s",
		"cert-dir":                         "",
		"cert-hosts":                       "[]",
		"cert-secret":                      "",
		"cert-validity":                    "8760h0m0s",
		"client-ca-file":                   "",
		"config":                           "",
		"kube-api-burst":                   "100",
		"kube-api-qps":                     "50",
		"kubeconfig":                       "",
		"leader-elect":                     "true",
		"leader-elect-lease-duration":      "15s",
		"leader-elect-renew-deadline":      "10s",
		"leader-elect-retry-period":        "2s",
		"leader-election-burst":            "10",
		"leader-election-id":               "pvguard-leader",
		"leader-election-namespace":        "",
		"leader-election-qps":              "5",
		"listen":                           ":9443",
		"live-read-budget":                 "250ms",
		"live-read-burst":                  "100",
		"live-read-qps":                    "50",
		"live-rereads-per-requester":       "10",
		"memory-limit":                     "",
		"metrics-listen":                   "",
		"namespace":                        "pvguard-system",
		"no-volume-fits-after":             "2m0s",
		"profiling":                        "false",
		"review-concurrency":               "32",
		"review-concurrency-per-requester": "16",
		"review-max-waiting":               "500",
		"review-max-waiting-bytes":         "268435456",
		"review-queue-length":              "50",
		"self-signed":                      "false",
		"self-signed-hosts":                "[localhost,127.0.0.1]",
		"service-name":                     "pvguard",
		"shutdown-delay":                   "5s",
		"shutdown-timeout":                 "25s",
		"webhook-configuration-name":       "pvguard",
	}
	f := newServeCommand(nil).Flags()
	if err := f.Parse(nil); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	f.VisitAll(func(fl *pflag.Flag) {
		seen[fl.Name] = true
		if v, ok := want[fl.Name]; !ok {
			t.Errorf("--%s=%s: not a flag of pvguard serve", fl.Name, fl.Value)
		} else if fl.Value.String() != v || fl.DefValue != v {
			t.Errorf("--%s: value %s, documented default %s, want %s", fl.Name, fl.Value, fl.DefValue, v)
		}
	})
	for name := range want {
		if !seen[name] {
			t.Errorf("--%s: missing", name)
		}
	}
}

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

// TestTrafficClassAndQueueFlags: the traffic classes, the fair queue and the live-read budget
// have their documented defaults, and values that cannot work are refused by name.
func TestTrafficClassAndQueueFlags(t *testing.T) {
	o, err := ParseServeArgs([]string{"--self-signed"})
	if err != nil {
		t.Fatal(err)
	}
	if c := o.APIClasses; c.LiveReads != (APIRate{50, 100}) || c.Audit != (APIRate{20, 40}) || c.Access != (APIRate{20, 40}) || c.LeaderElection != (APIRate{5, 10}) {
		t.Errorf("class defaults %+v", c)
	}
	if q := o.ReviewQueue; q.Concurrency != 32 || q.PerRequester != 16 || q.QueueLength != 50 || q.MaxWaiting != 500 || q.MaxWaitingBytes != 256<<20 || o.LiveReadBudget != 250*time.Millisecond || o.RereadsPerRequester != 10 {
		t.Errorf("queue defaults %+v, budget %s", q, o.LiveReadBudget)
	}
	for _, tc := range []struct {
		args []string
		want string // "" for valid
	}{
		{args: []string{"--live-read-qps=200", "--audit-burst=1", "--review-concurrency=64", "--live-read-budget=500ms"}},
		{args: []string{"--live-read-qps=0"}, want: "--live-read-qps"},
		{args: []string{"--leader-election-burst=0"}, want: "--leader-election-qps and --leader-election-burst"},
		{args: []string{"--live-read-budget=1s"}, want: "--live-read-budget"},
		{args: []string{"--live-read-budget=0"}, want: "--live-read-budget"},
		{args: []string{"--review-concurrency-per-requester=33"}, want: "--review-concurrency"},
		{args: []string{"--review-queue-length=600"}, want: "--review-max-waiting"},
	} {
		o, err := ParseServeArgs(append([]string{"--self-signed"}, tc.args...))
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		err = o.validate()
		if (err != nil) != (tc.want != "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%v: validate() = %v, want an error naming %q: %v", tc.args, err, tc.want, tc.want != "")
		}
	}
}
