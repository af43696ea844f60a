package manifests

// ObjectNames lets the external tests name a state's objects as the internal ones do.
var ObjectNames = objectNames
