//go:build race

package proxy

// raceOn says the tests run under the race detector, which allocates on
// its own: allocation counts are not the code's.
const raceOn = true
