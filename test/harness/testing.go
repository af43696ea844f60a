package harness

import (
	"context"
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

// WaitFor polls cond every interval until it holds or the timeout passes; the failure names
// what was awaited and the condition's last error.
func WaitFor(t testing.TB, interval, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), interval, timeout, true, func(context.Context) (bool, error) {
		ok, err := cond()
		last = err
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last error: %v)", what, err, last)
	}
}

// Namespace creates a fresh namespace named after the test (its name cut to maxPrefix
// characters, then suffix) and returns its generated name.
func Namespace(t testing.TB, c client.Client, maxPrefix int, suffix string) string {
	t.Helper()
	prefix := strings.ToLower(strings.TrimPrefix(t.Name(), "Test"))
	prefix = strings.NewReplacer("/", "-", "_", "-").Replace(prefix)
	if len(prefix) > maxPrefix {
		prefix = prefix[:maxPrefix]
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: strings.Trim(prefix, "-") + suffix + "-"}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	return ns.Name
}
