// gostack: a Go program whose code test_gopclntab.c reads the unwind
// table of (it is built, not run, by the test): frameless leaves, a
// recursive function with a frame, functions in assembly with and without
// a frame, a large frame, a closure and a goroutine.
package main

import "os"

// Implemented in asm_amd64.s.
func asmAdd(a, b int64) int64
func asmFrame(a int64) int64

//go:noinline
func leafAdd(a, b int) int { return a + b }

//go:noinline
func leafMix(x uint64) uint64 { return x*0x9e3779b97f4a7c15 ^ x>>29 }

//go:noinline
func recurse(n int, acc []int) int {
	if n == 0 {
		return int(asmFrame(int64(len(acc))))
	}
	var buf [16]int
	copy(buf[:], acc)
	buf[n%16] = leafAdd(n, buf[(n+1)%16])
	return recurse(n-1, buf[:]) + buf[(n+3)%16]
}

//go:noinline
func bigFrame(n int) int {
	var big [8192]byte
	for i := range big {
		big[i] = byte(i * n)
	}
	return int(big[n%len(big)]) + int(asmAdd(int64(n), 1))
}

func main() {
	done := make(chan uint64)
	go func() {
		done <- leafMix(uint64(len(os.Args)))
	}()
	r := recurse(200, nil) + bigFrame(len(os.Args))
	r += int(<-done)
	os.Exit(r & 1)
}
