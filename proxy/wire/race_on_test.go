//go:build race

package wire

// raceOn says the tests run under the race detector, which allocates on
// its own: allocation counts are not the code's.
const raceOn = true
