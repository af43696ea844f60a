package binder

import "github.com/pvguard/pvguard/storage"

// CacheShape is what the binder reads of the status of the volumes and claims it caches: the
// phases its decisions turn on, a volume's message (which a phase write sets beside the phase),
// and a claim's access modes and capacity (a bind is done once they are the volume's). The
// binder's writes are patches, so the fields a cache drops stay on the server. Its decision tests
// hold it to this shape (decisions on stripped objects are those on whole ones).
var CacheShape = storage.CacheShape{
	VolumeStatus: []string{"phase", "message"},
	ClaimStatus:  []string{"phase", "accessModes", "capacity"},
}
