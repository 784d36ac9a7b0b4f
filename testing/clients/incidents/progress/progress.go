// Package progress prints the incidents' Go clients' progress lines: one JSON object per
// line on stdout, {"ts": <unix seconds>, "event": <event>, ...fields}, so that a harness
// can time how long a client stayed silent and when its own first error came.
package progress

import (
	"encoding/json"
	"os"
	"sync"
	"time"
)

var out = struct {
	sync.Mutex
	enc *json.Encoder
}{enc: json.NewEncoder(os.Stdout)}

// Emit prints one line: `event` with `fields` (may be nil) and the time.
func Emit(event string, fields map[string]any) {
	if fields == nil {
		fields = map[string]any{}
	}
	fields["ts"] = float64(time.Now().UnixNano()) / 1e9
	fields["event"] = event
	out.Lock()
	defer out.Unlock()
	_ = out.enc.Encode(fields)
}

// Waiting prints a "waiting" line every 5 s while `pending` messages are unanswered,
// until done is closed.
func Waiting(done chan struct{}, pending int) {
	started := time.Now()
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			Emit("waiting", map[string]any{
				"pending": pending, "since_send_s": time.Since(started).Seconds(),
			})
		}
	}
}
