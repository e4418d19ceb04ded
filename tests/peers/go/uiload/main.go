// uiload writes real Go runtime/pprof CPU profiles for the web UI tests.
// Profile k alternates its workload (even k: mostly hashAlpha; odd k: mostly
// sortBeta), so that comparing two of them shows frames that got worse and
// frames that got better. The work is a fixed amount of computation, not a
// wall-clock time, so the CPU shares hold on a loaded machine too.
//
//	uiload -out DIR [-units 60] [-n 4]
//
// writes DIR/cpu-K.pb.gz for K in 0..n-1.
package main

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"time"
)

var sink byte

// One unit of each is roughly 10 ms of CPU on a 2020s x86 core.
const hashUnit = 1000
const sortUnit = 100

//go:noinline
func hashAlpha(units int) {
	buf := make([]byte, 4096)
	for n := 0; n < units*hashUnit; n++ {
		s := sha256.Sum256(buf)
		buf[0] ^= s[0]
	}
	sink ^= buf[0]
}

//go:noinline
func sortBeta(units int) {
	xs := make([]int, 2048)
	for n := 0; n < units*sortUnit; n++ {
		for i := range xs {
			xs[i] = (i * 7919) % 2048
		}
		sort.Ints(xs)
	}
	sink ^= byte(xs[5])
}

//go:noinline
func nested(depth int, units int) {
	if depth == 0 {
		sortBeta(units)
		return
	}
	nested(depth-1, units)
}

//go:noinline
func work(k int, units int) {
	a, b := units*3/4, units/4
	if k%2 == 1 {
		a, b = units/4, units*3/4
	}
	hashAlpha(a)
	nested(4, b)
}

func main() {
	out := flag.String("out", ".", "output directory")
	units := flag.Int("units", 60, "work per profile, in ~10 ms units of CPU")
	n := flag.Int("n", 4, "number of profiles")
	flag.Parse()
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
		work(k, *units)
		pprof.StopCPUProfile()
		f.Close()
		time.Sleep(300 * time.Millisecond) // distinct timestamps on the graph
	}
}
