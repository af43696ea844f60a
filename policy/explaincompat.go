package policy

import (
	"github.com/pvguard/pvguard/storage"
)

// Forwarding declarations of the storage vocabulary that package explain still names as policy's.
// This file is removed once explain imports storage.

const (
	AnnBindCompleted = storage.AnnBindCompleted
	AnnSelectedNode  = storage.AnnSelectedNode
)

var (
	AccessModesFit         = storage.AccessModesFit
	AttributesClassesMatch = storage.AttributesClassesMatch
	CapacityFits           = storage.CapacityFits
	ClaimClass             = storage.ClaimClass
	ClassesMatch           = storage.ClassesMatch
	MissingAccessModes     = storage.MissingAccessModes
	ModesMatch             = storage.ModesMatch
	ParseClaimSelector     = storage.ParseClaimSelector
	ParseVolumeAffinity    = storage.ParseVolumeAffinity
	Satisfies              = storage.Satisfies
	SelectorAdmits         = storage.SelectorAdmits
	VolumeClass            = storage.VolumeClass
)
