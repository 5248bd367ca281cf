// Command latency-proxy runs a latencyproxy.Proxy: every request to
// --listen waits --delay ± --jitter, then goes to --target; with
// --mb-per-s, each response body comes back no faster than that; with
// --lose P, a share P of the answers is dropped after the target gave it
// (the connection closes): lost responses; with --writes-per-s and
// --reads-per-s, requests beyond those rates are answered 503 SlowDown.
//
//	go run ./harness/latencyproxy/cmd/latency-proxy --target http://127.0.0.1:9000 --listen 127.0.0.1:9100 --delay 20ms --jitter 5ms
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/stratadb/strata/harness/latencyproxy"
)

func main() {
	target := flag.String("target", "http://127.0.0.1:9000", "the store's URL")
	listen := flag.String("listen", "127.0.0.1:9100", "address to listen on")
	delay := flag.Duration("delay", 20*time.Millisecond, "added to every request")
	jitter := flag.Duration("jitter", 5*time.Millisecond, "the delay varies by up to this, either way")
	mbps := flag.Float64("mb-per-s", 0, "each response body's rate in MB/s (0: as fast as the store sends it)")
	lose := flag.Float64("lose", 0, "share of answers dropped after the target gave them (0 to 1)")
	seed := flag.Uint64("seed", uint64(time.Now().UnixNano()), "seed of the lost answers")
	writes := flag.Float64("writes-per-s", 0, "answer 503 SlowDown to writes (PUT, POST, DELETE) beyond this rate (0: no limit)")
	reads := flag.Float64("reads-per-s", 0, "answer 503 SlowDown to reads (GET, HEAD, LIST) beyond this rate (0: no limit)")
	flag.Parse()
	if *lose < 0 || *lose > 1 {
		log.Fatalf("--lose %g: want a share from 0 to 1", *lose)
	}
	p, err := latencyproxy.New(*target, *delay, *jitter)
	if err != nil {
		log.Fatal(err)
	}
	p.BytesPerSecond = int64(*mbps * 1e6)
	p.LoseResponses, p.Seed = *lose, *seed
	p.WritesPerSecond, p.ReadsPerSecond = *writes, *reads
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "latency-proxy: %s -> %s, %v ± %v, %g MB/s per response (0: unpaced), %g of answers lost (seed %d), SlowDown beyond %g writes and %g reads a second (0: no limit)\n", ln.Addr(), *target, *delay, *jitter, *mbps, *lose, *seed, *writes, *reads)
	go report(p)
	log.Fatal(http.Serve(ln, p))
}

// report prints the proxy's counts every ten seconds while they change.
func report(p *latencyproxy.Proxy) {
	var last int64
	for range time.Tick(10 * time.Second) {
		if n := p.Requests(); n != last {
			last = n
			fmt.Fprintf(os.Stderr, "latency-proxy: %d requests, %d answers lost, %d slowed down\n", n, p.Lost(), p.Throttled())
		}
	}
}
