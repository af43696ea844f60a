package policy

// Catalogue returns the rules pvguard evaluates at admission, in ID order. Each rule lives in its
// own file, pvgNNN_<name>.go, with its table test beside it.
func Catalogue() []Rule {
	return []Rule{
		pvg001VolumeModeMatch(),
	}
}

// LookupRule finds a rule by ID or name.
func LookupRule(key string) (Rule, bool) {
	for _, rl := range Catalogue() {
		if string(rl.ID) == key || rl.Name == key {
			return rl, true
		}
	}
	return Rule{}, false
}
