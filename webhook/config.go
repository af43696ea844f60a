package webhook

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/go-logr/logr"

	"github.com/pvguard/pvguard/policy"
)

// ConfigFile serves the policy engine for a config file and rebuilds it when the file changes.
// A file that fails to parse is logged and counted, and the last good config stays in force:
// a typo in a ConfigMap must not switch enforcement off.
type ConfigFile struct {
	path   string
	engine atomic.Pointer[policy.Engine]
	// seen is the content last read, good or bad; a change is judged against it so that a write
	// between load and watch is not missed, and a bad file is reported once, not every poll.
	seen atomic.Pointer[string]
	// reloaded is closed, and replaced, whenever a new config takes effect (Reloaded).
	reloaded atomic.Pointer[chan struct{}]
	metrics  *Metrics
	log      logr.Logger
}

var _ EngineSource = &ConfigFile{}

// StaticEngine is an EngineSource with a fixed engine, used when no --config is given.
type StaticEngine struct{ E *policy.Engine }

// Engine implements EngineSource.
func (s StaticEngine) Engine() *policy.Engine { return s.E }

// StaticView is a ViewSource with a fixed view: every request reads the same state. Tests,
// benchmarks and pvguard test use it.
type StaticView struct{ V policy.View }

// View implements ViewSource.
func (s StaticView) View(context.Context) policy.View { return s.V }

// LoadConfigFile reads the config once; an invalid file at start-up is an error.
func LoadConfigFile(path string, m *Metrics, log logr.Logger) (*ConfigFile, error) {
	cf := &ConfigFile{path: path, metrics: m, log: log}
	first := make(chan struct{})
	cf.reloaded.Store(&first)
	if err := cf.reload(); err != nil {
		return nil, err
	}
	return cf, nil
}

// Engine implements EngineSource.
func (cf *ConfigFile) Engine() *policy.Engine { return cf.engine.Load() }

// Reloaded is closed when a config loaded after the call takes effect: whoever follows the
// config takes the channel, reads Engine, and waits on it.
func (cf *ConfigFile) Reloaded() <-chan struct{} { return *cf.reloaded.Load() }

func (cf *ConfigFile) reload() error {
	data, err := os.ReadFile(cf.path)
	content := fingerprint(data, err)
	cf.seen.Store(&content)
	if err == nil {
		var cfg *policy.Config
		cfg, err = policy.ParseConfig(data)
		if err == nil {
			cf.engine.Store(policy.NewEngine(cfg))
			next := make(chan struct{})
			close(*cf.reloaded.Swap(&next))
		}
	}
	cf.metrics.observeConfigLoad(err)
	if err != nil {
		return fmt.Errorf("loading policy config %s: %w", cf.path, err)
	}
	return nil
}

// Watch reloads the file on change until ctx ends. It watches the directory, not the file,
// because a mounted ConfigMap is updated by swapping a symlink; a slow poll backs up the watch
// for file systems without inotify.
func (cf *ConfigFile) Watch(ctx context.Context, poll time.Duration) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching policy config: %w", err)
	}
	defer w.Close()
	if err := w.Add(filepath.Dir(cf.path)); err != nil {
		return fmt.Errorf("watching policy config directory %s: %w", filepath.Dir(cf.path), err)
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	check := func() {
		if data, err := os.ReadFile(cf.path); fingerprint(data, err) != *cf.seen.Load() {
			if err := cf.reload(); err != nil {
				cf.log.Error(err, "keeping the previous policy config")
				return
			}
			cf.log.Info("policy config reloaded", "path", cf.path)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.Events:
			check()
		case err := <-w.Errors:
			cf.log.Error(err, "policy config watch")
		case <-tick.C:
			check()
		}
	}
}

// fingerprint is what a read of the file gave, so that changes can be told apart.
func fingerprint(data []byte, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return string(data)
}
