// A compiled load generator for bench/: the same closed loop as bench/loadgen.py (N connections,
// D requests in flight on each, latency from the write to the read that completes the reply),
// without Python's cost on the client side, so that the echo server's figure is the machine's
// limit rather than the load generator's.
//
// The Python harness (bench/members.py --driver go, bench/loadgen.py --driver go) forms the groups
// and pre-encodes one frame per connection; this program reads that plan as JSON on stdin:
//
//	{"host": "127.0.0.1", "conns": [{"port": 9092, "frame": "<base64>"}, ...], "depth": 1,
//	 "warmup_s": 1, "seconds": 5, "check_offset": 4}
//
// Each frame is a whole request (size prefix included); its correlation id (bytes 8..12) is
// rewritten per request. A reply counts as an error when its correlation id is not the next one
// expected, or, with check_offset >= 0, when the int16 at that offset of the reply body (after the
// correlation id) is not 0. It prints one JSON line with the window's figures.
package main

import (
	"bufio"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type plan struct {
	Host        string  `json:"host"`
	Conns       []conn  `json:"conns"`
	Depth       int     `json:"depth"`
	WarmupS     float64 `json:"warmup_s"`
	Seconds     float64 `json:"seconds"`
	CheckOffset int     `json:"check_offset"`
	ServerPids  []int   `json:"server_pids"` // their CPU use in the window is reported too (Linux)
}

type conn struct {
	Port  int    `json:"port"`
	Frame string `json:"frame"`
}

type result struct {
	Connections  int      `json:"connections"`
	Depth        int      `json:"depth"`
	Seconds      float64  `json:"seconds"`
	Done         int64    `json:"done"`
	ReqPerS      int64    `json:"req_per_s"`
	P50us        *float64 `json:"p50_us"`
	P99us        *float64 `json:"p99_us"`
	P999us       *float64 `json:"p999_us"`
	Errors       int64    `json:"errors"`
	ClientCPUPct int64    `json:"client_cpu_pct"`
	ServerCPUPct *int64   `json:"server_cpu_pct"`
}

var (
	recording atomic.Bool
	running   atomic.Bool
	errors    atomic.Int64
)

func main() {
	var p plan
	if err := json.NewDecoder(os.Stdin).Decode(&p); err != nil {
		fail("reading the plan: %v", err)
	}
	if p.Depth < 1 {
		p.Depth = 1
	}
	if p.Host != "127.0.0.1" && p.Host != "::1" && p.Host != "localhost" {
		fail("host %q: the load generator talks to loopback only", p.Host)
	}
	socks := make([]net.Conn, len(p.Conns))
	frames := make([][]byte, len(p.Conns))
	for i, c := range p.Conns {
		frame, err := base64.StdEncoding.DecodeString(c.Frame)
		if err != nil || len(frame) < 12 {
			fail("connection %d: a frame needs size, api key, version and correlation id", i)
		}
		frames[i] = frame
		s, err := net.DialTimeout("tcp", net.JoinHostPort(p.Host, strconv.Itoa(c.Port)), 30*time.Second)
		if err != nil {
			fail("connecting: %v", err)
		}
		s.(*net.TCPConn).SetNoDelay(true)
		socks[i] = s
	}
	lat := make([][]int64, len(socks))
	counts := make([]int64, len(socks))
	var wg sync.WaitGroup
	running.Store(true)
	for i := range socks {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			lat[i], counts[i] = drive(socks[i], frames[i], p.Depth, p.CheckOffset)
		}(i)
	}
	time.Sleep(time.Duration(p.WarmupS * float64(time.Second)))
	cpu0, srv0 := cpuSeconds(), serverSeconds(p.ServerPids)
	t0 := time.Now()
	recording.Store(true)
	time.Sleep(time.Duration(p.Seconds * float64(time.Second)))
	recording.Store(false)
	elapsed := time.Since(t0).Seconds()
	cpu, srv1 := cpuSeconds()-cpu0, serverSeconds(p.ServerPids)
	running.Store(false)
	for _, s := range socks { // the drivers stop at their next reply; a stuck one is cut off
		s.SetReadDeadline(time.Now().Add(10 * time.Second))
	}
	wg.Wait()
	var all []int64
	var done int64
	for i := range lat {
		all = append(all, lat[i]...)
		done += counts[i]
	}
	sort.Slice(all, func(a, b int) bool { return all[a] < all[b] })
	r := result{Connections: len(socks), Depth: p.Depth, Seconds: round(elapsed, 2), Done: done,
		ReqPerS: int64(float64(done) / elapsed), P50us: pct(all, 0.5), P99us: pct(all, 0.99),
		P999us: pct(all, 0.999), Errors: errors.Load(), ClientCPUPct: int64(100 * cpu / elapsed)}
	if srv0 >= 0 && srv1 >= 0 && len(p.ServerPids) > 0 {
		v := int64(100 * (srv1 - srv0) / elapsed)
		r.ServerCPUPct = &v
	}
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
}

// drive keeps `depth` requests in flight on one connection until the run stops; it returns the
// latencies (ns) and the number of replies inside the measured window.
func drive(s net.Conn, frame []byte, depth, checkOffset int) ([]int64, int64) {
	defer s.Close()
	r := bufio.NewReaderSize(s, 64*1024)
	sent := make([]time.Time, 0, depth) // send times of the requests in flight, oldest first
	var next, expected uint32
	var lat []int64
	var done int64
	send := func(k int) bool {
		batch := make([]byte, 0, k*len(frame))
		for j := 0; j < k; j++ {
			binary.BigEndian.PutUint32(frame[8:12], next)
			next = (next + 1) & 0x7FFFFFFF
			batch = append(batch, frame...)
		}
		now := time.Now()
		for j := 0; j < k; j++ {
			sent = append(sent, now)
		}
		_, err := s.Write(batch)
		return err == nil
	}
	if !send(depth) {
		errors.Add(1)
		return nil, 0
	}
	head := make([]byte, 8)
	body := make([]byte, 0, 256)
	for {
		if _, err := io.ReadFull(r, head); err != nil {
			if running.Load() {
				errors.Add(1)
			}
			return lat, done
		}
		now := time.Now()
		size := int(binary.BigEndian.Uint32(head[0:4]))
		corr := binary.BigEndian.Uint32(head[4:8])
		if size < 4 {
			errors.Add(1)
			return lat, done
		}
		if cap(body) < size-4 {
			body = make([]byte, size-4)
		}
		body = body[:size-4]
		if _, err := io.ReadFull(r, body); err != nil {
			if running.Load() {
				errors.Add(1)
			}
			return lat, done
		}
		t0 := sent[0]
		sent = sent[1:]
		ok := corr == expected
		expected = (expected + 1) & 0x7FFFFFFF
		if ok && checkOffset >= 0 {
			ok = len(body) >= checkOffset+2 && body[checkOffset] == 0 && body[checkOffset+1] == 0
		}
		if !ok {
			errors.Add(1)
		}
		if recording.Load() {
			done++
			lat = append(lat, now.Sub(t0).Nanoseconds())
		}
		if !running.Load() {
			if len(sent) == 0 {
				return lat, done
			}
			continue
		}
		if !send(1) {
			errors.Add(1)
			return lat, done
		}
	}
}

func pct(sorted []int64, q float64) *float64 {
	if len(sorted) == 0 {
		return nil
	}
	i := int(q * float64(len(sorted)))
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	v := round(float64(sorted[i])/1000, 1)
	return &v
}

func round(v float64, digits int) float64 {
	m := 1.0
	for ; digits > 0; digits-- {
		m *= 10
	}
	return float64(int64(v*m+0.5)) / m
}

func cpuSeconds() float64 {
	var u syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return float64(u.Utime.Sec+u.Stime.Sec) + float64(u.Utime.Usec+u.Stime.Usec)/1e6
}

// serverSeconds is the CPU time (user+sys) of the processes `pids` from /proc; -1 where unreadable.
func serverSeconds(pids []int) float64 {
	total := 0.0
	for _, pid := range pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return -1
		}
		text := string(data)
		fields := strings.Fields(text[strings.LastIndexByte(text, ')')+2:])
		if len(fields) < 13 {
			return -1
		}
		utime, _ := strconv.ParseFloat(fields[11], 64)
		stime, _ := strconv.ParseFloat(fields[12], 64)
		total += (utime + stime) / 100 // clock ticks: USER_HZ is 100 on Linux
	}
	return total
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "loadgen: "+format+"\n", args...)
	os.Exit(2)
}
