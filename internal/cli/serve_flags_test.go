package cli

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/webhook"
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
		"gc-percent":                       "30",
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
	if le := o.LeaderElection; le.LeaseDuration != 15*time.Second || le.RenewDeadline != 10*time.Second || le.RetryPeriod != 2*time.Second {
		t.Errorf("defaults %s/%s/%s, want kube-controller-manager's 15s/10s/2s", le.LeaseDuration, le.RenewDeadline, le.RetryPeriod)
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
		if o.Binder.NoVolumeFitsAfter != tc.want {
			t.Errorf("%v: NoVolumeFitsAfter %s, want %s", tc.args, o.Binder.NoVolumeFitsAfter, tc.want)
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
	if c := o.API.Classes; c.LiveReads != (APIRate{50, 100}) || c.Audit != (APIRate{20, 40}) || c.Access != (APIRate{20, 40}) || c.LeaderElection != (APIRate{5, 10}) {
		t.Errorf("class defaults %+v", c)
	}
	w := o.Webhook
	if q := w.ReviewQueue; q.Concurrency != 32 || q.PerRequester != 16 || q.QueueLength != 50 || q.MaxWaiting != 500 || q.MaxWaitingBytes != 256<<20 || w.LiveReadBudget != 250*time.Millisecond || w.RereadsPerRequester != 10 {
		t.Errorf("queue defaults %+v, budget %s", q, w.LiveReadBudget)
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

// TestServeFlagsLandInTheirOptions: each flag of `pvguard serve` sets its own field of its
// component's options, and no other (every flag given a value no other has).
func TestServeFlagsLandInTheirOptions(t *testing.T) {
	o, err := ParseServeArgs([]string{
		"--memory-limit=1Gi", "--gc-percent=33", "--listen=:1", "--metrics-listen=:2", "--profiling", "--namespace=ns",
		"--config=c.yaml", "--admission-policy-params=params", "--shutdown-timeout=3s", "--shutdown-delay=4s",
		"--kubeconfig=kc", "--kube-api-qps=5", "--kube-api-burst=6", "--live-read-qps=7", "--live-read-burst=8",
		"--audit-qps=9", "--audit-burst=10", "--access-qps=11", "--access-burst=12",
		"--leader-election-qps=13", "--leader-election-burst=14",
		"--cert-dir=dir", "--self-signed", "--self-signed-hosts=a,b", "--cert-secret=secret", "--service-name=svc",
		"--webhook-configuration-name=whc", "--cert-hosts=c,d", "--cert-validity=15h", "--ca-validity=16h",
		"--ca-overlap=17m", "--cert-check-interval=18s", "--client-ca-file=ca.pem",
		"--admission-read-rights=rbac", "--live-read-budget=19ms", "--live-rereads-per-requester=20",
		"--review-concurrency=21", "--review-concurrency-per-requester=22", "--review-queue-length=23",
		"--review-max-waiting=24", "--review-max-waiting-bytes=25",
		"--audit-interval=26s", "--binder=shadow", "--binder-workers=27", "--binder-resync=28s", "--no-volume-fits-after=29s",
		"--leader-elect=false", "--leader-election-namespace=lens", "--leader-election-id=leid",
		"--leader-elect-lease-duration=30s", "--leader-elect-renew-deadline=31s", "--leader-elect-retry-period=32s",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := ServeFlags{
		MemoryLimit: "1Gi", GCPercent: 33, Listen: ":1", MetricsListen: ":2", Profiling: true, Namespace: "ns",
		ConfigFile: "c.yaml", AdmissionPolicyParams: "params", ShutdownTimeout: 3 * time.Second, ShutdownDelay: 4 * time.Second,
		API: APIOptions{Kubeconfig: "kc", QPS: 5, Burst: 6, Classes: APIClasses{
			LiveReads: APIRate{7, 8}, Audit: APIRate{9, 10}, Access: APIRate{11, 12}, LeaderElection: APIRate{13, 14},
		}},
		Certs: CertOptions{
			Dir: "dir", SelfSigned: true, SelfSignedHosts: []string{"a", "b"}, Secret: "secret", ServiceName: "svc",
			WebhookConfigurationName: "whc", Hosts: []string{"c", "d"}, Validity: 15 * time.Hour, CAValidity: 16 * time.Hour,
			CAOverlap: 17 * time.Minute, CheckInterval: 18 * time.Second, ClientCAFile: "ca.pem",
		},
		Webhook: WebhookOptions{
			ReadRights: "rbac", LiveReadBudget: 19 * time.Millisecond, RereadsPerRequester: 20,
			ReviewQueue: webhook.FairQueueOptions{Concurrency: 21, PerRequester: 22, QueueLength: 23, MaxWaiting: 24, MaxWaitingBytes: 25},
		},
		Audit:  AuditOptions{Interval: 26 * time.Second},
		Binder: BinderOptions{Mode: binder.ModeShadow, Workers: 27, Resync: 28 * time.Second, NoVolumeFitsAfter: 29 * time.Second},
		LeaderElection: LeaderElectionOptions{Elect: false, Namespace: "lens", ID: "leid",
			LeaseDuration: 30 * time.Second, RenewDeadline: 31 * time.Second, RetryPeriod: 32 * time.Second},
	}
	if !reflect.DeepEqual(o, want) {
		t.Errorf("parsed\n%+v\nwant\n%+v", o, want)
	}
}
