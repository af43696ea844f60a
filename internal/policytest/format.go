package policytest

import "github.com/go-json-experiment/json/jsontext"

// The suite format, as written (docs/testing-policies.md). Decoded strictly: every field here is
// the whole vocabulary, and anything else is an error naming it.

// APIVersion and Kind identify a suite document.
const (
	APIVersion = "pvguard.io/v1alpha1"
	Kind       = "PolicyTest"
)

// suiteDoc is one PolicyTest document.
type suiteDoc struct {
	APIVersion string      `json:"apiVersion"`
	Kind       string      `json:"kind"`
	Metadata   metadataDoc `json:"metadata,omitzero"`
	// Description is for the reader; nothing reads it.
	Description string `json:"description,omitempty"`
	// ConfigFile is the policy config under test, relative to the suite's file, read as `pvguard
	// serve --config` reads it; Config is the same inline. Neither: the default config.
	ConfigFile string         `json:"configFile,omitempty"`
	Config     jsontext.Value `json:"config,omitzero"`
	// Now dates the audit (PVG023's ages) and the explanations (Leases' ages), RFC 3339; default
	// the time of the run.
	Now string `json:"now,omitempty"`
	// Sequential runs the cases in order, each admitted write stored (as the apiserver stores
	// it) before the next case runs; otherwise every case runs in the fixtures as given.
	Sequential bool        `json:"sequential,omitempty"`
	Fixtures   fixturesDoc `json:"fixtures,omitzero"`
	Cases      []caseDoc   `json:"cases"`
}

type metadataDoc struct {
	Name string `json:"name,omitempty"`
}

// fixturesDoc is the cluster state: files and directories of manifests relative to the suite
// (multi-document YAML, JSON, Lists such as `kubectl get -o yaml` writes), and objects inline.
type fixturesDoc struct {
	Files   []string         `json:"files,omitempty"`
	Objects []jsontext.Value `json:"objects,omitempty"`
}

// caseDoc is one case: exactly one of Write (with Expect), Audit or Explain.
type caseDoc struct {
	Name    string      `json:"name"`
	Write   *writeDoc   `json:"write,omitempty"`
	Expect  *expectDoc  `json:"expect,omitempty"`
	Audit   *auditDoc   `json:"audit,omitempty"`
	Explain *explainDoc `json:"explain,omitempty"`
}

// writeDoc is a write the apiserver sends pvguard's webhooks.
type writeDoc struct {
	// Operation is CREATE, UPDATE or DELETE; SubResource "" or "status".
	Operation   string `json:"operation"`
	SubResource string `json:"subResource,omitempty"`
	// Object is the object written (a PersistentVolume, PersistentVolumeClaim or StorageClass),
	// or Patch a JSON merge patch (RFC 7386) of the old object that makes it.
	Object jsontext.Value `json:"object,omitzero"`
	Patch  jsontext.Value `json:"patch,omitzero"`
	// OldObject is the object before the write, or OldFixture names a fixture that is
	// ([Kind/][namespace/]name). An UPDATE with neither updates the fixture the object names.
	OldObject  jsontext.Value `json:"oldObject,omitzero"`
	OldFixture string         `json:"oldFixture,omitempty"`
	// The requester: User (and Groups), or ServiceAccount namespace/name.
	User           string   `json:"user,omitempty"`
	Groups         []string `json:"groups,omitempty"`
	ServiceAccount string   `json:"serviceAccount,omitempty"`
	DryRun         bool     `json:"dryRun,omitempty"`
}

// expectDoc is what pvguard's webhooks answer a write. Denied and Warned are exact (omitted:
// none); Audited is checked only when given.
type expectDoc struct {
	Allowed bool      `json:"allowed,omitempty"`
	Denied  []string  `json:"denied,omitempty"`
	Warned  []string  `json:"warned,omitempty"`
	Audited *[]string `json:"audited,omitempty"`
	// Message is a regular expression that the denial's message or one of the warnings matches.
	Message string `json:"message,omitempty"`
}

// auditDoc is what the audit of the fixtures reports.
type auditDoc struct {
	// Findings must each be reported; with Exact, nothing else may be.
	Findings []findingDoc `json:"findings,omitempty"`
	Exact    bool         `json:"exact,omitempty"`
}

type findingDoc struct {
	Rule string `json:"rule"`
	// Object is Kind/name or Kind/namespace/name.
	Object string `json:"object,omitempty"`
	// Action is deny, warn or audit: the action the config gives the rule.
	Action string `json:"action,omitempty"`
	// Message is a regular expression the finding's text matches.
	Message string `json:"message,omitempty"`
}

// explainDoc is what `pvguard explain pvc` says of a claim.
type explainDoc struct {
	// Claim is namespace/name, a fixture.
	Claim string `json:"claim"`
	// BinderIdentity is the user the binder writes as (default the chart's ServiceAccount).
	BinderIdentity string `json:"binderIdentity,omitempty"`

	WaitingFor string `json:"waitingFor,omitempty"`
	// ProvisionerRunning is yes, no or unknown: whether the provisioner the claim waits for
	// appears to run, from its Lease (the fixtures' Leases).
	ProvisionerRunning string `json:"provisionerRunning,omitempty"`
	// State and Verdict are regular expressions the state and the verdict's sentence match.
	State   string `json:"state,omitempty"`
	Verdict string `json:"verdict,omitempty"`
	// Volume is the volume the verdict gives the claim ("" for none); Closest the closest volume
	// when none is given.
	Volume  *string `json:"volume,omitempty"`
	Closest *string `json:"closest,omitempty"`
	// Candidates are rows of the candidate table that must be there as written.
	Candidates []candidateDoc `json:"candidates,omitempty"`
}

type candidateDoc struct {
	Volume string `json:"volume"`
	Fits   *bool  `json:"fits,omitempty"`
	// Failing are the checks (columns) the volume fails, exactly; [] for none.
	Failing *[]string `json:"failing,omitempty"`
	TakenBy *string   `json:"takenBy,omitempty"`
}
