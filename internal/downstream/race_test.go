//go:build race

package downstream

const raceEnabled = true
