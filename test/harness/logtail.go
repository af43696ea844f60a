package harness

import (
	"bytes"
	"os"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// LogTail keeps the last lines a pvguard instance logged at info and above, so that a failed
// test can show what pvguard did (what it refused, and whom); errors also go to stderr, as
// Logger's do.
type LogTail struct {
	mu    sync.Mutex
	max   int
	lines []string
}

// NewLogTail keeps up to max lines.
func NewLogTail(max int) *LogTail { return &LogTail{max: max} }

// Write implements io.Writer for the logger: one call per entry.
func (l *LogTail) Write(p []byte) (int, error) {
	line := strings.TrimRight(string(p), "\n")
	if strings.Contains(line, "\tERROR\t") || os.Getenv("PVGUARD_E2E_VERBOSE") != "" {
		_, _ = os.Stderr.Write(p)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
	if over := len(l.lines) - l.max; over > 0 {
		l.lines = append(l.lines[:0:0], l.lines[over:]...)
	}
	return len(p), nil
}

// Logger is a logger that writes here.
func (l *LogTail) Logger() logr.Logger {
	lvl := zapcore.InfoLevel
	if os.Getenv("PVGUARD_E2E_VERBOSE") != "" {
		lvl = zapcore.DebugLevel
	}
	return zap.New(zap.UseDevMode(true), zap.Level(lvl), zap.StacktraceLevel(zapcore.PanicLevel), zap.WriteTo(l))
}

// Matching returns the kept lines that contain s.
func (l *LogTail) Matching(s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

// String is the kept lines.
func (l *LogTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b bytes.Buffer
	for _, line := range l.lines {
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}
