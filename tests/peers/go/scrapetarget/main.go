// scrapetarget is a pprof HTTP target for Kiln's pull-mode tests and
// benchmark. Standard library only (net/http/pprof), built offline.
//
//	scrapetarget -listen 127.0.0.1:PORT [-mode MODE]
//
// Modes:
//
//	work     net/http/pprof plus known work: burnCPU (2/3 of the time) and
//	         burnCPULight (1/3) spinning, allocSmall (1 KiB) and allocLarge
//	         (64 KiB) allocating at a fixed ratio, every allocation recorded
//	         (MemProfileRate = 1), a contended mutex and a blocking channel.
//	hang     accepts the request and never answers
//	garbage  answers 200 with random bytes
//	huge     answers 200 with an endless body
//	html     answers 200 with an HTML page
//
//	scrapetarget -many N -base-port P -cpu-profile FILE
//	         serves N ports P..P+N-1 (the benchmark): /debug/pprof/profile
//	         returns FILE at once (a captured CPU profile, so that 1,000
//	         targets do not fight over the one Go CPU profiler) and
//	         /debug/pprof/allocs is the live runtime profile.
package main

import (
	"flag"
	"fmt"
	"log"
	"math/rand"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	"sync"
	"time"
)

var sink []byte

//go:noinline
func burnCPU(d time.Duration) uint64 {
	var x uint64 = 1
	for end := time.Now().Add(d); time.Now().Before(end); {
		for i := 0; i < 10000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	return x
}

//go:noinline
func burnCPULight(d time.Duration) uint64 {
	return burnCPU(d)
}

//go:noinline
func allocSmall() { sink = make([]byte, 1024) }

//go:noinline
func allocLarge() { sink = make([]byte, 64*1024) }

func work() {
	go func() {
		for {
			burnCPU(20 * time.Millisecond)
			burnCPULight(10 * time.Millisecond)
		}
	}()
	go func() {
		for {
			for i := 0; i < 100; i++ {
				allocSmall()
			}
			allocLarge()
			time.Sleep(10 * time.Millisecond)
		}
	}()
	var mu sync.Mutex
	for g := 0; g < 2; g++ {
		go func() {
			for {
				mu.Lock()
				time.Sleep(time.Millisecond)
				mu.Unlock()
			}
		}()
	}
	ch := make(chan int)
	go func() {
		for {
			time.Sleep(5 * time.Millisecond)
			ch <- 1
		}
	}()
	go func() {
		for range ch {
		}
	}()
}

func pprofMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	return mux
}

func serve(addr string, h http.Handler) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.Serve(ln, h))
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address")
	mode := flag.String("mode", "work", "work|hang|garbage|huge|html")
	many := flag.Int("many", 0, "serve this many ports (benchmark)")
	basePort := flag.Int("base-port", 0, "first port with -many")
	cpuFile := flag.String("cpu-profile", "", "CPU profile served with -many")
	flag.Parse()

	if *many > 0 {
		cpu, err := os.ReadFile(*cpuFile)
		if err != nil {
			log.Fatal(err)
		}
		runtime.MemProfileRate = 64 * 1024
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/profile", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write(cpu)
		})
		mux.Handle("/debug/pprof/allocs", pprof.Handler("allocs"))
		go func() {
			for {
				for i := 0; i < 100; i++ {
					allocSmall()
				}
				allocLarge()
				time.Sleep(10 * time.Millisecond)
			}
		}()
		// Listen on every port before saying "ready"; a port in use is
		// exit status 3, so that the caller can retry with another base.
		for i := 0; i < *many; i++ {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *basePort+i))
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(3)
			}
			go http.Serve(ln, mux)
		}
		fmt.Println("ready")
		select {}
	}

	var h http.Handler
	switch *mode {
	case "work":
		runtime.MemProfileRate = 1
		runtime.SetBlockProfileRate(1)
		runtime.SetMutexProfileFraction(1)
		work()
		h = pprofMux()
	case "hang":
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		})
	case "garbage":
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b := make([]byte, 4096)
			rand.Read(b)
			w.Write(b)
		})
	case "huge":
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b := make([]byte, 1<<16)
			rand.Read(b)
			for {
				if _, err := w.Write(b); err != nil {
					return
				}
			}
		})
	case "html":
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, "<!DOCTYPE html>\n<html><body><h1>Welcome</h1></body></html>\n")
		})
	default:
		log.Fatalf("unknown mode %q", *mode)
	}
	serve(*listen, h)
}
