package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/pvguard/pvguard/test/admissionload"
	"github.com/pvguard/pvguard/test/gen"
)

// recorderPath is where a child server starts (POST ?n=) and returns (GET) its recording of
// server-side durations. It is outside the timed handler, so it is not measured itself.
const recorderPath = "/bench/recorder"

// handlerFor builds the named server's handler and the TLS material it is served with.
func handlerFor(name string) (http.Handler, *admissionload.TLS, *tls.Config, error) {
	t, err := admissionload.IssueTLS()
	if err != nil {
		return nil, nil, nil, err
	}
	pvguard := admissionload.PVGuard(t, gen.AdmissionView(), admissionload.Logger())
	h := pvguard.Handler()
	if name == "noop" {
		h = admissionload.Noop()
	} else if name != "pvguard" {
		return nil, nil, nil, fmt.Errorf("unknown server %q: want pvguard or noop", name)
	}
	return h, t, pvguard.TLSConfig(), nil
}

func startInProcess(name string) (server, func(), error) {
	h, t, cfg, err := handlerFor(name)
	if err != nil {
		return server{}, nil, err
	}
	rec := new(atomic.Pointer[admissionload.Recorder])
	addr, stop, err := admissionload.Serve(admissionload.Timed(h, rec), cfg)
	if err != nil {
		return server{}, nil, err
	}
	s := server{name: name, url: "https://" + addr, c: admissionload.Client(t.Pool),
		record: func(n int) error { rec.Store(admissionload.NewRecorder(n)); return nil },
		recorded: func() ([]time.Duration, error) {
			r := rec.Swap(nil)
			if r == nil {
				return nil, errors.New("not recording")
			}
			return r.Durations(), nil
		}}
	return s, stop, nil
}

// childHello is what a child prints on its first line of output.
type childHello struct {
	Addr  string `json:"addr"`
	CAPEM string `json:"caPEM"`
}

// serveChild serves one server until stdin closes (the parent exits or stops it).
func serveChild(name string) error {
	h, t, cfg, err := handlerFor(name)
	if err != nil {
		return err
	}
	rec := new(atomic.Pointer[admissionload.Recorder])
	mux := http.NewServeMux()
	mux.Handle("/", admissionload.Timed(h, rec))
	mux.HandleFunc(recorderPath, func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost:
			n, err := strconv.Atoi(r.URL.Query().Get("n"))
			if err != nil || n <= 0 {
				http.Error(w, "want ?n=<observations>", http.StatusBadRequest)
				return
			}
			rec.Store(admissionload.NewRecorder(n))
		case http.MethodGet:
			got := rec.Swap(nil)
			if got == nil {
				http.Error(w, "not recording", http.StatusConflict)
				return
			}
			_ = json.NewEncoder(w).Encode(got.Durations())
		}
	})
	addr, stop, err := admissionload.Serve(mux, cfg)
	if err != nil {
		return err
	}
	defer stop()
	if err := json.NewEncoder(os.Stdout).Encode(childHello{Addr: addr, CAPEM: string(t.CAPEM)}); err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

func startChild(name string) (server, func(), error) {
	self, err := os.Executable()
	if err != nil {
		return server{}, nil, err
	}
	cmd := exec.Command(self, "-child", name)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return server{}, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return server{}, nil, err
	}
	if err := cmd.Start(); err != nil {
		return server{}, nil, err
	}
	stop := func() { _ = stdin.Close(); _ = cmd.Wait() }
	var hello childHello
	if err := json.NewDecoder(bufio.NewReader(stdout)).Decode(&hello); err != nil {
		stop()
		return server{}, nil, fmt.Errorf("reading the child's address: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(hello.CAPEM)) {
		stop()
		return server{}, nil, errors.New("the child's CA does not parse")
	}
	url := "https://" + hello.Addr
	c := admissionload.Client(pool)
	s := server{name: name, url: url, c: c,
		record: func(n int) error {
			resp, err := c.Post(fmt.Sprintf("%s%s?n=%d", url, recorderPath, n), "text/plain", nil)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("starting the recorder: HTTP %d", resp.StatusCode)
			}
			return nil
		},
		recorded: func() ([]time.Duration, error) {
			resp, err := c.Get(url + recorderPath)
			if err != nil {
				return nil, err
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return nil, fmt.Errorf("reading the recorder: HTTP %d", resp.StatusCode)
			}
			var d []time.Duration
			return d, json.NewDecoder(resp.Body).Decode(&d)
		}}
	return s, stop, nil
}
