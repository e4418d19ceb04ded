// uiload writes real Go runtime/pprof CPU profiles for the web UI tests.
// Profile k alternates its workload (even k: mostly hashAlpha; odd k: mostly
// sortBeta), so that comparing two of them shows frames that got worse and
// frames that got better.
//
//	uiload -out DIR [-cpu 900ms] [-n 4]
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

//go:noinline
func hashAlpha(d time.Duration) {
	end := time.Now().Add(d)
	buf := make([]byte, 4096)
	for time.Now().Before(end) {
		s := sha256.Sum256(buf)
		buf[0] ^= s[0]
	}
	sink ^= buf[0]
}

//go:noinline
func sortBeta(d time.Duration) {
	end := time.Now().Add(d)
	xs := make([]int, 2048)
	for time.Now().Before(end) {
		for i := range xs {
			xs[i] = (i * 7919) % 2048
		}
		sort.Ints(xs)
	}
	sink ^= byte(xs[5])
}

//go:noinline
func nested(depth int, d time.Duration) {
	if depth == 0 {
		sortBeta(d)
		return
	}
	nested(depth-1, d)
}

//go:noinline
func work(k int, d time.Duration) {
	a, b := d*3/4, d/4
	if k%2 == 1 {
		a, b = d/4, d*3/4
	}
	hashAlpha(a)
	nested(4, b)
}

func main() {
	out := flag.String("out", ".", "output directory")
	cpu := flag.Duration("cpu", 900*time.Millisecond, "CPU profile duration")
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
		work(k, *cpu)
		pprof.StopCPUProfile()
		f.Close()
		time.Sleep(300 * time.Millisecond) // distinct timestamps on the graph
	}
}
