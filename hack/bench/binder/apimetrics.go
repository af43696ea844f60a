package main

import (
	"bufio"
	"bytes"
	"context"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
)

// requests counts the apiserver's served requests (apiserver_request_total) by "VERB resource"
// (with "/subresource" when there is one), for the resources a binder touches. The harness makes
// no write while a binder runs, so the difference of two snapshots around a run is what the
// binder asked for: it shows each binder's real request rate under the same client flags.
type requests map[string]float64

var watched = map[string]bool{"persistentvolumes": true, "persistentvolumeclaims": true, "events": true}

func scrapeRequests(ctx context.Context, cs kubernetes.Interface) (requests, error) {
	body, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	out := requests{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "apiserver_request_total{")
		if !ok {
			continue
		}
		labelText, value, ok := strings.Cut(line, "} ")
		if !ok {
			continue
		}
		labels := parseLabels(labelText)
		if !watched[labels["resource"]] || labels["verb"] == "LIST" || labels["verb"] == "WATCH" {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		k := labels["verb"] + " " + labels["resource"]
		if s := labels["subresource"]; s != "" {
			k += "/" + s
		}
		out[k] += v
	}
	return out, sc.Err()
}

// parseLabels reads `a="x",b="y"` (label values here never contain quotes or commas).
func parseLabels(s string) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if ok {
			m[k] = strings.Trim(v, `"`)
		}
	}
	return m
}

// since is r minus an earlier snapshot.
func (r requests) since(before requests) requests {
	out := requests{}
	for k, v := range r {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// writes sums the mutating requests, gets the GETs (LIST and WATCH are never counted: the
// harness polls with LISTs and informers list and watch).
func (r requests) writes() float64 { return r.sum(func(verb string) bool { return isWrite(verb) }) }
func (r requests) gets() float64   { return r.sum(func(verb string) bool { return verb == "GET" }) }

func (r requests) sum(keep func(verb string) bool) float64 {
	t := 0.0
	for k, v := range r {
		verb, _, _ := strings.Cut(k, " ")
		if keep(verb) {
			t += v
		}
	}
	return t
}

func isWrite(verb string) bool {
	switch verb {
	case "POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY", "CREATE", "UPDATE":
		return true
	}
	return false
}
