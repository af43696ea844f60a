package policyparams

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/webhook"
)

// Object is the admission policies' parameter object for a config
// (policy.AdmissionPolicyParams in a ConfigMap).
func Object(o policy.ParamObject, c *policy.Config) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name},
		Data:       policy.AdmissionPolicyParams(c),
	}
}

// SyncOptions configure a Sync.
type SyncOptions struct {
	// Object is the parameter object the admission policies' bindings name.
	Object policy.ParamObject
	// Engines gives the loaded config; Reloaded, when set, is closed when a new one takes
	// effect (ConfigFile.Reloaded).
	Engines  webhook.EngineSource
	Reloaded func() <-chan struct{}
	// Cache watches the object (an informer restricted to it: list and watch by name only);
	// Writer creates and updates it.
	Cache  cache.Cache
	Writer client.Client
	// Elected is closed once this replica may write (the manager's Elected: at once without
	// leader election).
	Elected <-chan struct{}
	// WriteGuard, when set, is asked just before every write and stops it with its error: with
	// leader election, whether this replica still provably holds the Lease
	// (leaseguard.Guard.Check), as the binder asks. Elected stays closed in a replica frozen past
	// its Lease, which on waking must not write the config it loaded over the one the new leader
	// wrote. Writer should refuse such writes too (leaseguard.Guard.RoundTripper): the client's
	// rate limiter can hold a write for longer than a Lease lasts.
	WriteGuard func() error
	// Resync re-checks the object this often, whatever happens (default one minute).
	Resync   time.Duration
	Registry prometheus.Registerer
	Log      logr.Logger
}

// Sync keeps the admission policies' parameter object equal to the policy config this
// replica has loaded, so that the policies and the webhook enforce one config: on start, on every
// reload and whenever the object changes or goes (someone edited or deleted it), the elected
// replica writes it back. Every replica reports whether the object matches its own config
// (pvguard_admission_policy_params_in_sync): a replica whose mounted config lags, an object
// pvguard may not write, or a write that keeps failing is a drift an alert can name.
type Sync struct {
	o       SyncOptions
	trigger chan struct{}
	inSync  prometheus.Gauge
	writes  *prometheus.CounterVec
}

// NewSync registers the metrics and the watch of the object; Start runs it.
func NewSync(ctx context.Context, o SyncOptions) (*Sync, error) {
	if o.Resync <= 0 {
		o.Resync = time.Minute
	}
	s := &Sync{
		o:       o,
		trigger: make(chan struct{}, 1),
		inSync: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pvguard_admission_policy_params_in_sync",
			Help: "1 when the admission policies' parameter object holds this replica's loaded policy config, 0 when it differs or is missing (the policies then enforce another config, or none).",
		}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pvguard_admission_policy_params_writes_total",
			Help: "Writes of the admission policies' parameter object by this replica, by result (success or error).",
		}, []string{"result"}),
	}
	if err := o.Registry.Register(s.inSync); err != nil {
		return nil, fmt.Errorf("registering the parameter object's metrics: %w", err)
	}
	if err := o.Registry.Register(s.writes); err != nil {
		return nil, fmt.Errorf("registering the parameter object's metrics: %w", err)
	}
	inf, err := o.Cache.GetInformer(ctx, &corev1.ConfigMap{})
	if err != nil {
		return nil, fmt.Errorf("watching the admission policies' parameter object %s/%s: %w", o.Object.Namespace, o.Object.Name, err)
	}
	poke := func(any) { s.poke() }
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: poke, UpdateFunc: func(_, obj any) { poke(obj) }, DeleteFunc: poke,
	}); err != nil {
		return nil, fmt.Errorf("watching the admission policies' parameter object %s/%s: %w", o.Object.Namespace, o.Object.Name, err)
	}
	return s, nil
}

func (s *Sync) poke() {
	select {
	case s.trigger <- struct{}{}:
	default:
	}
}

// NeedLeaderElection: every replica reports its drift; only the elected one writes.
func (s *Sync) NeedLeaderElection() bool { return false }

// Start checks, and on the elected replica repairs, the object until ctx ends.
func (s *Sync) Start(ctx context.Context) error {
	tick := time.NewTicker(s.o.Resync)
	defer tick.Stop()
	// Being elected is one more reason to look again; once it has happened, nothing to wait for.
	elected := s.o.Elected
	var retry <-chan time.Time
	for {
		var reloaded <-chan struct{}
		if s.o.Reloaded != nil {
			reloaded = s.o.Reloaded()
		}
		retry = nil
		if err := s.sync(ctx, s.o.Elected); err != nil {
			s.o.Log.Error(err, "keeping the admission policies' parameter object current; retrying")
			retry = time.After(5 * time.Second)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.trigger:
		case <-reloaded:
		case <-elected:
			elected = nil
		case <-tick.C:
		case <-retry:
		}
	}
}

// isClosed: a replica once elected stays so until its process ends (the manager exits when it
// loses the Lease).
func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// sync compares the object with the loaded config, sets the gauge, and, when this replica is
// elected and they differ, writes the config's parameters into it. The gauge says 1 only once the
// watch has seen the object as written.
func (s *Sync) sync(ctx context.Context, elected <-chan struct{}) error {
	want := policy.AdmissionPolicyParams(s.o.Engines.Engine().Config())
	key := client.ObjectKey{Namespace: s.o.Object.Namespace, Name: s.o.Object.Name}
	live := &corev1.ConfigMap{}
	err := s.o.Cache.Get(ctx, key, live)
	switch {
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		return fmt.Errorf("reading %s: %w", key, err)
	}
	if live != nil && maps.Equal(live.Data, want) {
		s.inSync.Set(1)
		return nil
	}
	s.inSync.Set(0)
	if !isClosed(elected) {
		return nil
	}
	if s.o.WriteGuard != nil {
		if err := s.o.WriteGuard(); err != nil {
			return fmt.Errorf("not writing %s: %w", key, err)
		}
	}
	if live == nil {
		err = s.o.Writer.Create(ctx, Object(s.o.Object, s.o.Engines.Engine().Config()))
		s.o.Log.Info("created the missing admission policies' parameter object", "object", key, "error", err)
	} else {
		changed := differingKeys(live.Data, want)
		live = live.DeepCopy()
		live.Data = want
		err = s.o.Writer.Update(ctx, live)
		s.o.Log.Info("wrote the loaded policy config into the admission policies' parameter object", "object", key, "keys", changed, "error", err)
	}
	result := "success"
	if err != nil {
		result = "error"
	}
	s.writes.WithLabelValues(result).Inc()
	if err != nil {
		return fmt.Errorf("writing %s: %w", key, err)
	}
	return nil
}

// differingKeys are the keys whose values differ between a and b (logged: the values hold only
// the config's names, but the keys say enough).
func differingKeys(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
