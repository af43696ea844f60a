package policy

// Catalogue returns the rules pvguard evaluates at admission, in ID order. Each rule lives in its
// own file, pvgNNN_<name>.go, with its table test beside it.
func Catalogue() []Rule {
	return []Rule{
		pvg001VolumeModeMatch(),
		pvg002ClaimRefUIDConsistent(),
		pvg003VolumeNameImmutable(),
		pvg004NoDoubleBinding(),
		pvg005CapacityFits(),
		pvg006AccessModesSubset(),
		pvg007StorageClassMatch(),
		pvg008SelectorMatch(),
		pvg009NodeAffinityMatch(),
		pvg010VolumeGrab(),
		pvg011ReclaimDowngrade(),
		pvg012ProtectionFinalizers(),
		pvg013BinderAnnotations(),
		pvg014ClaimRefShape(),
		pvg015PhaseConsistency(),
		pvg016SecretsInAttributes(),
		pvg017SingleDefaultClass(),
		pvg018VolumeAttributesClassMatch(),
	}
}

// LookupRule finds a rule, admission or audit, by ID or name.
func LookupRule(key string) (Rule, bool) {
	for _, rl := range append(Catalogue(), AuditRules()...) {
		if string(rl.ID) == key || rl.Name == key {
			return rl, true
		}
	}
	return Rule{}, false
}
