package harness

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Must fails the test when err is set, saying what was being done.
func Must(t testing.TB, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// PollInterval is how often WaitFor and Eventually try again.
const PollInterval = 100 * time.Millisecond

// FailureNote, when a suite's TestMain sets it, adds to the message of a WaitFor or Eventually
// that failed (where the suite's logs are, say).
var FailureNote func() string

func failureNote() string {
	if FailureNote == nil {
		return ""
	}
	return "; " + FailureNote()
}

// Poll calls cond every interval until it holds or timeout passes (or ctx ends). It returns nil
// once cond holds, else the timeout's error with cond's last error.
func Poll(ctx context.Context, interval, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		last = err
		return ok, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("%w (last error: %v)", err, last)
	}
	return err
}

// WaitFor polls cond every PollInterval until it holds or the timeout passes; the failure names
// what was awaited and the condition's last error.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	if err := Poll(context.Background(), PollInterval, timeout, cond); err != nil {
		t.Fatalf("waiting for %s: %v%s", what, err, failureNote())
	}
}

// Eventually retries f every PollInterval until it returns nil or the timeout passes (config
// reloads, cache sync); the failure names what was tried and f's last error.
func Eventually(t testing.TB, timeout time.Duration, what string, f func(context.Context) error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), PollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		last = f(ctx)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: %v%s", what, last, failureNote())
	}
}

// Namespace creates a fresh namespace named after the test (its name cut to 20 characters, then
// suffix) and returns its generated name.
func Namespace(t testing.TB, c client.Client, suffix string) string {
	t.Helper()
	prefix := strings.ToLower(strings.TrimPrefix(t.Name(), "Test"))
	prefix = strings.NewReplacer("/", "-", "_", "-").Replace(prefix)
	if len(prefix) > 20 {
		prefix = prefix[:20]
	}
	return PrefixedNamespace(t, c, strings.Trim(prefix, "-")+suffix)
}

// PrefixedNamespace creates a fresh namespace named prefix-<random> and returns its name.
func PrefixedNamespace(t testing.TB, c client.Client, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	return ns.Name
}

// Knob is a test setting read from an environment variable (see ReadKnobs).
type Knob struct {
	env string
	set func(string) error
}

// EnvKnob binds the environment variable env to *p.
func EnvKnob[T int | uint64 | float32 | float64 | time.Duration](env string, p *T) Knob {
	return Knob{env: env, set: func(s string) (err error) {
		switch p := any(p).(type) {
		case *int:
			*p, err = strconv.Atoi(s)
		case *uint64:
			*p, err = strconv.ParseUint(s, 10, 64)
		case *float32:
			var f float64
			f, err = strconv.ParseFloat(s, 32)
			*p = float32(f)
		case *float64:
			*p, err = strconv.ParseFloat(s, 64)
		case *time.Duration:
			*p, err = time.ParseDuration(s)
		}
		return err
	}}
}

// ReadKnobs sets each knob whose environment variable is set (and not empty); a value that does
// not parse fails the test.
func ReadKnobs(t testing.TB, knobs ...Knob) {
	t.Helper()
	for _, k := range knobs {
		if s := os.Getenv(k.env); s != "" {
			if err := k.set(s); err != nil {
				t.Fatalf("%s=%q: %v", k.env, s, err)
			}
		}
	}
}
