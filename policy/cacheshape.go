package policy

import "github.com/pvguard/pvguard/storage"

// CacheShape is what a cache of volumes and claims must keep for the rules: the status fields
// that any of them (admission's or the audit's) declares it reads (Rule.StatusReads), of the
// object it judges or of one it reads through the View. The rule tests hold each rule to the
// shape of the catalogue (findings on stripped objects are those on whole ones).
func CacheShape(rules []Rule) storage.CacheShape {
	var s storage.CacheShape
	for i := range rules {
		s = s.Union(storage.CacheShape{
			VolumeStatus: rules[i].StatusReads[KindPersistentVolume],
			ClaimStatus:  rules[i].StatusReads[KindPersistentVolumeClaim],
		})
	}
	return s
}
