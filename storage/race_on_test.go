//go:build race

package storage

// raceDetector says the tests run under the race detector, which allocates on its own.
const raceDetector = true
