package policy

// Catalogue returns pvguard's rules in ID order: the ones admission runs and the ones the audit
// runs, each declaring which (Rule.Judges). Each rule lives in its own file, pvgNNN_<name>.go,
// with its table test beside it; adding a rule is adding its file and its line here
// (docs/development.md).
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
		pvg020DanglingClaimRef(),
		pvg021ClaimLost(),
		pvg022MisboundPair(),
		pvg023ReleasedAging(),
		pvg024FailedVolume(),
		pvg025NodeGone(),
	}
}

// LookupRule finds a rule of the catalogue by ID or name.
func LookupRule(key string) (Rule, bool) {
	for _, rl := range Catalogue() {
		if string(rl.ID) == key || rl.Name == key {
			return rl, true
		}
	}
	return Rule{}, false
}
