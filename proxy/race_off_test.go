//go:build !race

package proxy

// raceOn says the tests run under the race detector (see race_on_test.go).
const raceOn = false
