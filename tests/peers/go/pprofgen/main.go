// pprofgen writes pprof profiles with the Go runtime, for Kiln's tests and
// benchmarks. Standard library only (built offline).
//
//	pprofgen cpu -o FILE [-seconds S]   CPU profile of a labelled workload
//	pprofgen heap -o FILE               heap profile (four sample types)
//	pprofgen big -o FILE [-mb N] [-seed N]
//	        a large CPU-shaped profile (samples/count, cpu/nanoseconds) whose
//	        stacks are real call stacks of this program, resampled: the Go
//	        runtime cannot sample fast enough to write megabytes in seconds.
package main

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: pprofgen cpu|heap|big -o FILE ...")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	out := fs.String("o", "", "output file")
	seconds := fs.Float64("seconds", 2, "cpu: seconds of profiling")
	mb := fs.Float64("mb", 20, "big: uncompressed size in MB")
	seed := fs.Int64("seed", 1, "big: random seed")
	fs.Parse(os.Args[2:])
	if *out == "" {
		fmt.Fprintln(os.Stderr, "pprofgen: -o is required")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "cpu":
		err = writeCPU(*out, time.Duration(*seconds*float64(time.Second)))
	case "heap":
		err = writeHeap(*out)
	case "big":
		err = writeBig(*out, int(*mb*1e6), *seed)
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pprofgen:", err)
		os.Exit(1)
	}
}

// ---- cpu ---------------------------------------------------------------

var sink uint64

// mix is small enough to be inlined into its callers, so that the profile
// has locations with several lines (inlined frames).
func mix(x uint64) uint64 { return x*6364136223846793005 + 1442695040888963407 }

func hashWork(deadline time.Time) {
	var buf [64]byte
	for time.Now().Before(deadline) {
		for i := 0; i < 1000; i++ {
			s := sha256.Sum256(buf[:])
			copy(buf[:], s[:])
		}
	}
	sink += uint64(buf[0])
}

func sortWork(deadline time.Time) {
	r := rand.New(rand.NewSource(1))
	for time.Now().Before(deadline) {
		xs := make([]int, 4096)
		for i := range xs {
			xs[i] = r.Int()
		}
		sort.Ints(xs)
		sink += uint64(xs[0])
	}
}

func spinRecursive(depth int, deadline time.Time) uint64 {
	if depth == 0 {
		x := uint64(1)
		for i := 0; i < 100000 && time.Now().Before(deadline); i++ {
			x = mix(x)
		}
		return x
	}
	return spinRecursive(depth-1, deadline) + 1
}

func spinWork(deadline time.Time) {
	for time.Now().Before(deadline) {
		sink += spinRecursive(5, deadline)
	}
}

func writeCPU(path string, d time.Duration) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		return err
	}
	deadline := time.Now().Add(d)
	done := make(chan struct{})
	work := []struct {
		name string
		fn   func(time.Time)
	}{{"hash", hashWork}, {"sort", sortWork}, {"spin", spinWork}}
	for i, w := range work {
		go func(i int, name string, fn func(time.Time)) {
			labels := pprof.Labels("worker", name, "shard", fmt.Sprint(i%2))
			pprof.Do(context.Background(), labels, func(context.Context) { fn(deadline) })
			done <- struct{}{}
		}(i, w.name, w.fn)
	}
	// Unlabelled work on the main goroutine too.
	spinWork(deadline)
	for range work {
		<-done
	}
	pprof.StopCPUProfile()
	return nil
}

// ---- heap --------------------------------------------------------------

var live [][]byte

//go:noinline
func allocSmall(n int) {
	for i := 0; i < n; i++ {
		b := make([]byte, 64)
		if i%4 == 0 {
			live = append(live, b)
		}
	}
}

//go:noinline
func allocLarge(n int) {
	for i := 0; i < n; i++ {
		b := make([]byte, 1<<16)
		if i%2 == 0 {
			live = append(live, b)
		}
	}
}

func writeHeap(path string) error {
	runtime.MemProfileRate = 1
	allocSmall(5000)
	allocLarge(50)
	runtime.GC()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	err = pprof.Lookup("heap").WriteTo(f, 0)
	runtime.KeepAlive(live)
	return err
}

// ---- big ---------------------------------------------------------------

// pb is a minimal protobuf writer for the Profile message.
type pb struct{ b []byte }

func (p *pb) varint(x uint64) {
	for x >= 0x80 {
		p.b = append(p.b, byte(x)|0x80)
		x >>= 7
	}
	p.b = append(p.b, byte(x))
}
func (p *pb) tag(field, wire int) { p.varint(uint64(field<<3 | wire)) }
func (p *pb) uint(field int, x uint64) {
	if x != 0 {
		p.tag(field, 0)
		p.varint(x)
	}
}
func (p *pb) int(field int, x int64) { p.uint(field, uint64(x)) }
func (p *pb) bytes(field int, b []byte) {
	p.tag(field, 2)
	p.varint(uint64(len(b)))
	p.b = append(p.b, b...)
}
func (p *pb) packed(field int, xs []uint64) {
	var q pb
	for _, x := range xs {
		q.varint(x)
	}
	p.bytes(field, q.b)
}

type frame struct {
	fn, file string
	line     int
}

// realStacks returns distinct call stacks (leaf first) of this program.
func realStacks(r *rand.Rand, n int) [][]frame {
	var stacks [][]frame
	seen := map[string]bool{}
	for len(stacks) < n {
		var pcs [64]uintptr
		depth := 3 + r.Intn(20)
		k := captureAt(depth, r.Intn(4), pcs[:])
		frames := runtime.CallersFrames(pcs[:k])
		var st []frame
		key := ""
		for {
			f, more := frames.Next()
			st = append(st, frame{f.Function, f.File, f.Line})
			key += fmt.Sprintf("%s:%d;", f.Function, f.Line)
			if !more {
				break
			}
		}
		// Give every stack a synthetic leaf so that there are thousands
		// of distinct functions, as in a large program.
		leaf := frame{fmt.Sprintf("example.com/app/pkg%d.(*T%d).Method%d", r.Intn(200), r.Intn(50), r.Intn(20)), fmt.Sprintf("/src/app/pkg/file%d.go", r.Intn(500)), 1 + r.Intn(2000)}
		st = append([]frame{leaf}, st...)
		key = leaf.fn + key
		if !seen[key] {
			seen[key] = true
			stacks = append(stacks, st)
		}
	}
	return stacks
}

//go:noinline
func captureA(d, v int, pcs []uintptr) int { return captureAt(d-1, v, pcs) }

//go:noinline
func captureB(d, v int, pcs []uintptr) int { return captureAt(d-1, v, pcs) }

//go:noinline
func captureC(d, v int, pcs []uintptr) int { return captureAt(d-1, v, pcs) }

//go:noinline
func captureAt(d, v int, pcs []uintptr) int {
	if d <= 0 {
		return runtime.Callers(1, pcs)
	}
	switch (d + v) % 3 {
	case 0:
		return captureA(d, v+1, pcs)
	case 1:
		return captureB(d, v*2, pcs)
	default:
		return captureC(d, v+d, pcs)
	}
}

func writeBig(path string, size int, seed int64) error {
	r := rand.New(rand.NewSource(seed))
	strs := map[string]int{"": 0}
	table := []string{""}
	str := func(s string) int64 {
		if i, ok := strs[s]; ok {
			return int64(i)
		}
		strs[s] = len(table)
		table = append(table, s)
		return int64(len(table) - 1)
	}
	type fkey struct{ fn, file string }
	funcs := map[fkey]uint64{}
	type lkey struct {
		fn   uint64
		line int
	}
	locs := map[lkey]uint64{}
	var fnMsgs, locMsgs pb
	locOf := func(fr frame) uint64 {
		fid, ok := funcs[fkey{fr.fn, fr.file}]
		if !ok {
			fid = uint64(len(funcs) + 1)
			funcs[fkey{fr.fn, fr.file}] = fid
			var m pb
			m.uint(1, fid)
			m.int(2, str(fr.fn))
			m.int(3, str(fr.fn))
			m.int(4, str(fr.file))
			fnMsgs.bytes(5, m.b)
		}
		lid, ok := locs[lkey{fid, fr.line}]
		if !ok {
			lid = uint64(len(locs) + 1)
			locs[lkey{fid, fr.line}] = lid
			var line, m pb
			line.uint(1, fid)
			line.int(2, int64(fr.line))
			m.uint(1, lid)
			m.uint(2, 1)
			m.uint(3, 0x400000+lid*16)
			m.bytes(4, line.b)
			locMsgs.bytes(4, m.b)
		}
		return lid
	}
	stacks := realStacks(r, 4000)
	var samples pb
	period := int64(10000000)
	for n := 0; len(samples.b)+len(fnMsgs.b)+len(locMsgs.b)+len(table)*24 < size; n++ {
		st := stacks[r.Intn(len(stacks))]
		ids := make([]uint64, len(st))
		for i, fr := range st {
			ids[i] = locOf(fr)
		}
		count := 1 + r.Intn(5)
		var s, vals, lab pb
		s.packed(1, ids)
		vals.varint(uint64(count))
		vals.varint(uint64(int64(count) * period))
		s.bytes(2, vals.b)
		lab.int(1, str("request"))
		lab.int(2, str(fmt.Sprintf("req-%d", n%5000)))
		s.bytes(3, lab.b)
		samples.bytes(2, s.b)
	}
	var p pb
	for _, vt := range [][2]string{{"samples", "count"}, {"cpu", "nanoseconds"}} {
		var m pb
		m.int(1, str(vt[0]))
		m.int(2, str(vt[1]))
		p.bytes(1, m.b)
	}
	p.b = append(p.b, samples.b...)
	var mp pb
	mp.uint(1, 1)
	mp.uint(2, 0x400000)
	mp.uint(3, 0x400000+uint64(len(locs)+1)*16)
	mp.int(5, str("/usr/bin/app"))
	mp.uint(7, 1)
	p.bytes(3, mp.b)
	p.b = append(p.b, locMsgs.b...)
	p.b = append(p.b, fnMsgs.b...)
	var pt pb
	pt.int(1, str("cpu"))
	pt.int(2, str("nanoseconds"))
	for _, s := range table {
		p.bytes(6, []byte(s))
	}
	p.int(9, time.Now().UnixNano())
	p.int(10, int64(10*time.Second))
	p.bytes(11, pt.b)
	p.int(12, period)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	zw, _ := gzip.NewWriterLevel(f, gzip.BestSpeed)
	if _, err := zw.Write(p.b); err != nil {
		return err
	}
	return zw.Close()
}
