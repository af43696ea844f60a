package webhook_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/webhook"
)

func TestConfigFileReloadsAndKeepsLastGoodConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.yaml")
	write := func(s string) {
		t.Helper()
		// Rename into place, as a ConfigMap volume update does.
		tmp := filepath.Join(dir, ".tmp")
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write("rules:\n  volume-grab: {action: warn}\n")
	reg := prometheus.NewRegistry()
	m := webhook.NewMetrics(reg)
	cf, err := webhook.LoadConfigFile(path, m, logr.Discard())
	if err != nil {
		t.Fatalf("LoadConfigFile: %v", err)
	}
	grab, _ := policy.LookupRule("PVG010")
	if got := cf.Engine().Config().ActionFor(&grab); got != policy.ActionWarn {
		t.Fatalf("initial action %s", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cf.Watch(ctx, 50*time.Millisecond) }()

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	write("rules:\n  volume-grab: {action: deny}\n")
	waitFor("reload to deny", func() bool { return cf.Engine().Config().ActionFor(&grab) == policy.ActionDeny })

	write("rules:\n  volume-grab: {action: sometimes}\n")
	errors := func() float64 {
		return counterValue(t, reg, "pvguard_config_reloads_total", map[string]string{"result": "error"})
	}
	waitFor("the bad config to be counted", func() bool { return errors() == 1 })
	if got := cf.Engine().Config().ActionFor(&grab); got != policy.ActionDeny {
		t.Fatalf("a bad config replaced the good one: action %s", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Watch: %v", err)
	}
}

func TestLoadConfigFileRejectsABadFileAtStartup(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte("rules:\n  PVG999: {action: deny}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := webhook.LoadConfigFile(path, nil, logr.Discard()); err == nil {
		t.Fatal("a config naming an unknown rule was accepted")
	}
}
