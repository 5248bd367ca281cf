// Command latency-proxy runs a latencyproxy.Proxy: every request to
// --listen waits --delay ± --jitter, then goes to --target; with
// --mb-per-s, each response body comes back no faster than that.
//
//	go run ./internal/latencyproxy/cmd/latency-proxy --target http://127.0.0.1:9000 --listen 127.0.0.1:9100 --delay 20ms --jitter 5ms
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/stratadb/strata/internal/latencyproxy"
)

func main() {
	target := flag.String("target", "http://127.0.0.1:9000", "the store's URL")
	listen := flag.String("listen", "127.0.0.1:9100", "address to listen on")
	delay := flag.Duration("delay", 20*time.Millisecond, "added to every request")
	jitter := flag.Duration("jitter", 5*time.Millisecond, "the delay varies by up to this, either way")
	mbps := flag.Float64("mb-per-s", 0, "each response body's rate in MB/s (0: as fast as the store sends it)")
	flag.Parse()
	p, err := latencyproxy.New(*target, *delay, *jitter)
	if err != nil {
		log.Fatal(err)
	}
	p.BytesPerSecond = int64(*mbps * 1e6)
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "latency-proxy: %s -> %s, %v ± %v, %g MB/s per response (0: unpaced)\n", ln.Addr(), *target, *delay, *jitter, *mbps)
	log.Fatal(http.Serve(ln, p))
}
