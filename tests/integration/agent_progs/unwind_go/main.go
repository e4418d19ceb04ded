// unwind_go: Go 1.x code the frame pointer cannot walk: frameless leaves
// (main.leaf) and assembly that uses BP as a general register
// (crypto/sha256.block). agent_unwind runs it under the agent.
package main

import (
	"crypto/sha256"
	"fmt"
	"os"
	"time"
)

// A frameless leaf (no locals, no calls: the compiler gives it no frame)
// with enough work to be sampled.
//
//go:noinline
func leaf(x uint64) uint64 {
	for i := 0; i < 64; i++ {
		x = x*2654435761 + 1
	}
	return x
}

//go:noinline
func mid(n int) uint64 {
	var s uint64
	for i := 0; i < n; i++ {
		s += leaf(uint64(i))
	}
	return s
}

//go:noinline
func hashing(buf []byte) [32]byte {
	var h [32]byte
	for i := 0; i < 200; i++ {
		h = sha256.Sum256(buf)
	}
	return h
}

func main() {
	secs := 5.0
	if len(os.Args) > 1 {
		fmt.Sscanf(os.Args[1], "%g", &secs)
	}
	buf := make([]byte, 4096)
	var s uint64
	end := time.Now().Add(time.Duration(secs * float64(time.Second)))
	for time.Now().Before(end) {
		s += mid(20000)
		h := hashing(buf)
		s += uint64(h[0])
	}
	fmt.Println(s)
}
