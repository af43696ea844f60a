package policy

import (
	"fmt"
)

// Decision is the outcome of evaluating one review against the catalogue, with the findings
// sorted by the action configured for their rule. Rules set to off produce nothing.
type Decision struct {
	Deny  []Finding
	Warn  []Finding
	Audit []Finding
}

// Allowed reports whether the write may proceed.
func (d *Decision) Allowed() bool { return len(d.Deny) == 0 }

// Engine evaluates reviews against the catalogue under one Config. It is immutable and safe for
// concurrent use; a config reload builds a new Engine.
type Engine struct {
	cfg        *Config
	rules      []Rule
	auditRules []Rule
}

// NewEngine returns an engine for the config; a nil config means DefaultConfig.
func NewEngine(cfg *Config) *Engine {
	if cfg == nil {
		cfg = DefaultConfig()
	}
	return &Engine{cfg: cfg, rules: Catalogue(), auditRules: AuditRules()}
}

// Config returns the engine's configuration.
func (e *Engine) Config() *Config { return e.cfg }

// Admit evaluates a write. An error means the write could not be judged: the review lacks what
// its operation needs (see Review), or a related object could not be read; the caller decides
// whether that fails open or closed.
func (e *Engine) Admit(r *Review, v View) (Decision, error) {
	var d Decision
	if r.Operation == OperationDelete {
		return d, nil
	}
	if err := r.judgeable(); err != nil {
		return Decision{}, err
	}
	ns := r.namespaces()
	v = newMemoView(v)
	for i := range e.rules {
		rl := &e.rules[i]
		if !rl.appliesTo(r.Kind) {
			continue
		}
		action := e.cfg.ActionFor(rl)
		if action == ActionOff || e.cfg.Exempt(rl, ns, r.User) {
			continue
		}
		found, err := rl.Check(r, v, e.cfg)
		if err != nil {
			return Decision{}, fmt.Errorf("evaluating %s %s on %s: %w", rl.ID, rl.Name, r.Object(), err)
		}
		for _, f := range found {
			f.Rule, f.Name, f.Action = rl.ID, rl.Name, action
			if f.Object.Kind == "" {
				f.Object = r.Object()
			}
			switch action {
			case ActionDeny:
				d.Deny = append(d.Deny, f)
			case ActionWarn:
				d.Warn = append(d.Warn, f)
			default:
				d.Audit = append(d.Audit, f)
			}
		}
	}
	return d, nil
}

// judgeable reports why a review that is not a DELETE cannot be judged: an operation other than
// CREATE or UPDATE, an unknown kind, no new object, or an UPDATE without the old one. Judging such
// a review would mean allowing a write nobody looked at (an UPDATE without its old object would
// pass every rule that guards a change).
func (r *Review) judgeable() error {
	var cur, old bool
	switch r.Kind {
	case KindPersistentVolume:
		cur, old = r.PV != nil, r.OldPV != nil
	case KindPersistentVolumeClaim:
		cur, old = r.PVC != nil, r.OldPVC != nil
	case KindStorageClass:
		cur, old = r.SC != nil, r.OldSC != nil
	default:
		return fmt.Errorf("cannot judge a write of kind %q", r.Kind)
	}
	switch {
	case r.Operation != OperationCreate && r.Operation != OperationUpdate:
		return fmt.Errorf("cannot judge operation %q on a %s", r.Operation, r.Kind)
	case !cur:
		return fmt.Errorf("%s of a %s without the object", r.Operation, r.Kind)
	case r.Operation == OperationUpdate && !old:
		return fmt.Errorf("UPDATE of %s without the old object", r.Object())
	}
	return nil
}
