package main

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/procfs"
)

// memPoint is one sample of the child's memory, in bytes.
type memPoint struct {
	T         float64 `json:"t"` // seconds since the process started
	RSS       uint64  `json:"rss"`
	HeapInuse uint64  `json:"heap_inuse,omitempty"`
	HeapAlloc uint64  `json:"heap_alloc,omitempty"`
	Sys       uint64  `json:"sys,omitempty"`
}

// memStats are the peaks and the last values the sampler has seen.
type memStats struct {
	PeakRSS       uint64   `json:"peak_rss"`
	HWM           uint64   `json:"vm_hwm"` // the kernel's own peak RSS, read at the same time
	PeakHeapInuse uint64   `json:"peak_heap_inuse"`
	PeakHeapAlloc uint64   `json:"peak_heap_alloc"`
	PeakSys       uint64   `json:"peak_sys"`
	Last          memPoint `json:"last"`
}

// sampler reads the child's VmRSS and VmHWM every 100 ms (/proc/PID/status) and its Go heap
// from /metrics every second (go_memstats_*): a scrape costs the child a little CPU, reading
// /proc costs it nothing.
type sampler struct {
	mu     sync.Mutex
	stats  memStats
	series []memPoint // one a second
}

func (m *sampler) run(ctx context.Context, s *server) {
	proc, err := procfs.NewProc(s.pid)
	if err != nil {
		return
	}
	fast := time.NewTicker(100 * time.Millisecond)
	slow := time.NewTicker(time.Second)
	defer fast.Stop()
	defer slow.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.exited:
			return
		case <-fast.C:
			if st, err := proc.NewStatus(); err == nil {
				m.mu.Lock()
				m.stats.PeakRSS = max(m.stats.PeakRSS, st.VmRSS)
				m.stats.HWM = max(m.stats.HWM, st.VmHWM)
				m.stats.Last.RSS = st.VmRSS
				m.stats.Last.T = time.Since(s.started).Seconds()
				m.mu.Unlock()
			}
		case <-slow.C:
			mt, err := s.metrics(ctx)
			if err != nil {
				continue // not serving yet
			}
			inuse, alloc, sys := uint64(mt.value("go_memstats_heap_inuse_bytes", nil)), uint64(mt.value("go_memstats_heap_alloc_bytes", nil)), uint64(mt.value("go_memstats_sys_bytes", nil))
			m.mu.Lock()
			m.stats.PeakHeapInuse = max(m.stats.PeakHeapInuse, inuse)
			m.stats.PeakHeapAlloc = max(m.stats.PeakHeapAlloc, alloc)
			m.stats.PeakSys = max(m.stats.PeakSys, sys)
			m.stats.Last.HeapInuse, m.stats.Last.HeapAlloc, m.stats.Last.Sys = inuse, alloc, sys
			m.series = append(m.series, m.stats.Last)
			m.mu.Unlock()
		}
	}
}

func (m *sampler) snapshot() memStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stats
}

func (m *sampler) points() []memPoint {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]memPoint(nil), m.series...)
}
