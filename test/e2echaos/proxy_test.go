package e2echaos

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/pvguard/pvguard/test/harness"
)

// recordingProxy stands between one replica and the apiserver, as its network does: the replica's
// kubeconfig points at it (plain HTTP on loopback), and it forwards every request over TLS to the
// apiserver with the suite's admin credentials (the identity the replicas have anyway). It
// timestamps every write it forwards (POST, PUT, PATCH, DELETE) with the answer, learns which
// Lease holder identity its replica writes, and can stall: while stalled it forwards no request,
// returns no answer and passes no byte of an open watch, and on release it lets them all go, as a
// link that stops moving packets and then recovers would.
type recordingProxy struct {
	name       string
	srv        *httptest.Server
	kubeconfig string

	mu       sync.Mutex
	writes   []*proxiedWrite
	identity string        // the holderIdentity of the Lease writes this replica made
	gate     chan struct{} // non-nil while stalled; closed on release
}

// proxiedWrite is one write the proxy saw.
type proxiedWrite struct {
	Method, Path string
	// Resource is the resource written ("persistentvolumes", "leases", "events", ...) and Object
	// its namespace/name/subresource.
	Resource, Object string
	// Carried is what a volume or claim write carried: the link and phase.
	Carried string
	// Received is when the replica sent it to the proxy, Forwarded when the proxy sent it on
	// to the apiserver, Answered when the apiserver's answer came back.
	Received, Forwarded, Answered time.Time
	Code                          int
	Err                           string
	// Held: the proxy was stalled when it arrived, so it was forwarded only on release.
	Held bool
	// ClientGone: the replica had given up on it by the time it was answered.
	ClientGone bool

	clientCtx context.Context
}

func (w *proxiedWrite) String() string {
	s := fmt.Sprintf("%s %s", w.Method, w.Object)
	if w.Carried != "" {
		s += " (" + w.Carried + ")"
	}
	s += fmt.Sprintf(" -> %d", w.Code)
	if w.Err != "" {
		s += " (" + w.Err + ")"
	}
	if w.Held {
		s += fmt.Sprintf(", held by the stalled link from %s", w.Received.Format("15:04:05.000"))
	}
	if w.ClientGone {
		s += ", the replica had given up on it"
	}
	return s
}

type writeKey struct{}

// newRecordingProxy starts a proxy to the suite's apiserver and writes a kubeconfig for it.
func newRecordingProxy(t *testing.T, name string) *recordingProxy {
	t.Helper()
	cfg := cluster(t).Config
	target, err := url.Parse(cfg.Host)
	harness.Must(t, err, "parsing the apiserver's address")
	if target.Scheme == "" {
		target, err = url.Parse("https://" + cfg.Host)
		harness.Must(t, err, "parsing the apiserver's address")
	}
	transport, err := rest.TransportFor(cfg)
	harness.Must(t, err, "the apiserver's transport")
	p := &recordingProxy{name: name}
	rp := &httputil.ReverseProxy{
		Rewrite:        func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport:      transport,
		FlushInterval:  -1, // watches stream
		ModifyResponse: p.answered,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if rec, _ := r.Context().Value(writeKey{}).(*proxiedWrite); rec != nil {
				p.mu.Lock()
				rec.Code, rec.Err, rec.Answered = http.StatusBadGateway, err.Error(), time.Now()
				p.mu.Unlock()
			}
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { p.serve(rp, w, r) }))
	t.Cleanup(func() {
		p.release()
		p.srv.CloseClientConnections()
		p.srv.Close()
	})
	p.kubeconfig = filepath.Join(t.TempDir(), "kubeconfig-"+name)
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: proxy
  cluster:
    server: %s
users:
- name: proxy
  user: {}
contexts:
- name: proxy
  context:
    cluster: proxy
    user: proxy
current-context: proxy
`, p.srv.URL)
	harness.Must(t, os.WriteFile(p.kubeconfig, []byte(kc), 0o600), "writing the proxy's kubeconfig")
	return p
}

func isWrite(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

func (p *recordingProxy) serve(rp *httputil.ReverseProxy, w http.ResponseWriter, r *http.Request) {
	received := time.Now()
	held := p.wait()
	if !isWrite(r.Method) {
		rp.ServeHTTP(w, r)
		return
	}
	resource, object := describePath(r.URL.Path)
	rec := &proxiedWrite{Method: r.Method, Path: r.URL.Path, Resource: resource, Object: object,
		Received: received, Held: held, clientCtx: r.Context()}
	if resource == "persistentvolumes" || resource == "persistentvolumeclaims" {
		if body, err := io.ReadAll(r.Body); err == nil {
			_ = r.Body.Close()
			r.Body = io.NopCloser(bytes.NewReader(body))
			rec.Carried = carried(body)
		}
	}
	ctx := r.Context()
	if held {
		// Bytes on a stalled link arrive when it recovers, whether or not the sender still
		// waits for the answer: forward the write even if the replica has given up on it.
		ctx = context.WithoutCancel(ctx)
		w = noCloseNotify{w}
	}
	p.mu.Lock()
	rec.Forwarded = time.Now()
	p.writes = append(p.writes, rec)
	p.mu.Unlock()
	rp.ServeHTTP(w, r.WithContext(context.WithValue(ctx, writeKey{}, rec)))
}

// noCloseNotify hides the connection's close notification from the reverse proxy, which would
// otherwise cancel a held write whose sender has hung up.
type noCloseNotify struct{ http.ResponseWriter }

func (n noCloseNotify) Flush() {
	if f, ok := n.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// answered runs when the apiserver's answer arrives: it is held while the link is stalled,
// recorded, and for the replica's own Lease writes read for the holder identity.
func (p *recordingProxy) answered(resp *http.Response) error {
	held := p.wait()
	rec, _ := resp.Request.Context().Value(writeKey{}).(*proxiedWrite)
	if rec != nil {
		p.mu.Lock()
		rec.Code, rec.Answered = resp.StatusCode, time.Now()
		rec.Held = rec.Held || held
		rec.ClientGone = rec.clientCtx.Err() != nil
		p.mu.Unlock()
		if rec.Resource == "leases" && resp.StatusCode/100 == 2 {
			body, err := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if err != nil {
				return err
			}
			resp.Body = io.NopCloser(bytes.NewReader(body))
			if id := holderIdentity(body, resp.Header.Get("Content-Encoding")); id != "" {
				p.mu.Lock()
				p.identity = id
				p.mu.Unlock()
			}
		}
	}
	resp.Body = &stallingBody{ReadCloser: resp.Body, p: p}
	return nil
}

func holderIdentity(body []byte, encoding string) string {
	if encoding == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return ""
		}
		if body, err = io.ReadAll(zr); err != nil {
			return ""
		}
	}
	// JSON or protobuf, whichever the replica's client asked for.
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
	if err != nil {
		return ""
	}
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok || lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

// carried summarizes a volume or claim write's body: its link and phase.
func carried(body []byte) string {
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
	if err != nil {
		return ""
	}
	switch o := obj.(type) {
	case *corev1.PersistentVolume:
		ref := "no claimRef"
		if r := o.Spec.ClaimRef; r != nil {
			ref = fmt.Sprintf("claimRef %s/%s uid %.8s", r.Namespace, r.Name, r.UID)
		}
		return fmt.Sprintf("%s, phase %q", ref, o.Status.Phase)
	case *corev1.PersistentVolumeClaim:
		return fmt.Sprintf("volumeName %q, bind-completed %q, phase %q", o.Spec.VolumeName, o.Annotations[annBindCompleted], o.Status.Phase)
	}
	return ""
}

// stallingBody passes an answer's bytes (a watch's events, say) only while the link moves.
type stallingBody struct {
	io.ReadCloser
	p *recordingProxy
}

func (b *stallingBody) Read(buf []byte) (int, error) {
	b.p.wait()
	n, err := b.ReadCloser.Read(buf)
	b.p.wait()
	return n, err
}

// wait blocks while the link is stalled; it reports whether it had to.
func (p *recordingProxy) wait() bool {
	p.mu.Lock()
	g := p.gate
	p.mu.Unlock()
	if g == nil {
		return false
	}
	<-g
	return true
}

// stall stops the link: nothing moves either way until release.
func (p *recordingProxy) stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gate == nil {
		p.gate = make(chan struct{})
	}
}

// release lets everything the stalled link held go.
func (p *recordingProxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gate != nil {
		close(p.gate)
		p.gate = nil
	}
}

// Identity is the Lease holder identity this replica has written, "" before it first held the
// Lease.
func (p *recordingProxy) Identity() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.identity
}

// Writes returns a copy of the writes seen so far, in the order they were forwarded.
func (p *recordingProxy) Writes() []proxiedWrite {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]proxiedWrite, len(p.writes))
	for i, w := range p.writes {
		out[i] = *w
		out[i].clientCtx = nil
	}
	return out
}

// describePath names the resource and object of an API path: /api/v1/namespaces/ns/
// persistentvolumeclaims/c/status is ("persistentvolumeclaims", "ns/c/status").
func describePath(path string) (resource, object string) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return "", path
	}
	ns := ""
	if len(parts) >= 3 && parts[0] == "namespaces" {
		ns, parts = parts[1], parts[2:]
	}
	if len(parts) == 0 {
		return "namespaces", ns
	}
	resource = parts[0]
	rest := append([]string{}, parts[1:]...)
	if ns != "" {
		rest = append([]string{ns}, rest...)
	}
	return resource, resource + "/" + strings.Join(rest, "/")
}
