// profgen writes real Go runtime/pprof profiles for the query tests: a CPU
// profile of a few busy functions (one recursive, some small enough to be
// inlined) and a heap profile with every allocation sampled.
//
//	profgen OUTDIR   -> OUTDIR/cpu.pb.gz, OUTDIR/heap.pb.gz
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"syscall"
	"time"
)

var sink []byte
var acc uint64

func small(i uint64) uint64 { return i*2654435761 ^ (i >> 3) } // inlined

func spin(n int) {
	for i := 0; i < n; i++ {
		acc += small(uint64(i))
	}
}

func recurse(depth, n int) {
	if depth == 0 {
		spin(n)
		return
	}
	recurse(depth-1, n)
}

func allocSmall() { sink = make([]byte, 64) }

func allocBig() { sink = make([]byte, 1<<20) }

func allocMany() {
	for i := 0; i < 1000; i++ {
		allocSmall()
	}
	allocBig()
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: profgen OUTDIR")
		os.Exit(2)
	}
	runtime.MemProfileRate = 1
	cpu, err := os.Create(filepath.Join(os.Args[1], "cpu.pb.gz"))
	if err != nil {
		panic(err)
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		panic(err)
	}
	// Run until the process has used 300ms of CPU (so the profile has
	// samples even on a loaded machine), at most 30s of wall time.
	deadline := time.Now().Add(30 * time.Second)
	for cpuTime() < 300*time.Millisecond && time.Now().Before(deadline) {
		spin(100000)
		recurse(5, 100000)
		allocMany()
	}
	pprof.StopCPUProfile()
	cpu.Close()
	runtime.GC()
	heap, err := os.Create(filepath.Join(os.Args[1], "heap.pb.gz"))
	if err != nil {
		panic(err)
	}
	if err := pprof.Lookup("allocs").WriteTo(heap, 0); err != nil {
		panic(err)
	}
	heap.Close()
}
