package policy

import (
	"errors"
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

// Admit evaluates a write. Every rule that applies is evaluated, even when another could not
// judge: the decision holds the findings of all the rules that could, and the error joins one
// *RuleError per rule that could not (a related object could not be read). So one failing rule
// never hides another's finding, and a caller that refuses on deny findings refuses for the
// right reason. An error with no decision means the review itself cannot be judged: it lacks
// what its operation needs (see Review). Either way the caller decides whether an error fails
// open or closed.
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
	var failed []error // nil, and not allocated, unless a rule fails
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
			failed = append(failed, &RuleError{Rule: rl.ID, Name: rl.Name, Object: r.Object(), Err: err})
			continue
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
	return d, errors.Join(failed...)
}

// RuleError is one rule's failure to judge one object, usually because a related object could
// not be read. Admit and the audit return them (joined) beside the findings of the other rules;
// errors.As finds one in what they return, which tells a partial result from a review that could
// not be judged at all.
type RuleError struct {
	Rule   RuleID
	Name   string
	Object ObjectRef
	Err    error
}

func (e *RuleError) Error() string {
	return fmt.Sprintf("evaluating %s %s on %s: %v", e.Rule, e.Name, e.Object, e.Err)
}

func (e *RuleError) Unwrap() error { return e.Err }

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
