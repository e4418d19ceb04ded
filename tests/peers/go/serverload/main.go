// serverload writes real Go runtime/pprof profiles for the server tests:
// a CPU profile of a few known hot functions and a heap profile.
//
//	serverload -out DIR [-cpu 1s] [-n 1]
//
// writes DIR/cpu-N.pb.gz and DIR/heap-N.pb.gz for N in 0..n-1.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"time"
)

var sink uint64
var keep [][]byte

//go:noinline
func spinAlpha(d time.Duration) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		for i := 0; i < 10000; i++ {
			sink += uint64(i) * 7
		}
	}
}

//go:noinline
func spinBeta(d time.Duration) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		for i := 0; i < 10000; i++ {
			sink ^= uint64(i) << 3
		}
	}
}

//go:noinline
func recurse(depth int, d time.Duration) {
	if depth == 0 {
		spinBeta(d)
		return
	}
	recurse(depth-1, d)
}

//go:noinline
func allocate(n int) {
	for i := 0; i < n; i++ {
		keep = append(keep, make([]byte, 4096+i%512))
	}
}

func main() {
	out := flag.String("out", ".", "output directory")
	cpu := flag.Duration("cpu", time.Second, "CPU profile duration")
	n := flag.Int("n", 1, "number of profile pairs")
	flag.Parse()
	runtime.MemProfileRate = 4096
	for k := 0; k < *n; k++ {
		f, err := os.Create(filepath.Join(*out, fmt.Sprintf("cpu-%d.pb.gz", k)))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		part := *cpu / 3
		spinAlpha(part)
		recurse(5, part)
		spinAlpha(part)
		pprof.StopCPUProfile()
		f.Close()

		allocate(2000)
		h, err := os.Create(filepath.Join(*out, fmt.Sprintf("heap-%d.pb.gz", k)))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		runtime.GC()
		if err := pprof.Lookup("heap").WriteTo(h, 0); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		h.Close()
	}
}
