// Command kafkago-incident replays S1 with segmentio/kafka-go at the version its go.mod
// pins (v0.4.8): a Writer given the whole bootstrap list of a cluster that later shrinks.
// No hangwatch code: it only produces and reports what kafka-go answered.
//
// Each -rate tick it writes one batch of -batch messages with Writer.WriteMessages (the
// Writer's defaults otherwise: RequiredAcks=None is overridden to RequireAll, as the
// write-up's service did). Every line on stdout is one JSON object {"ts", "event", ...}:
// start, ack (n: messages acknowledged so far), error (kafka-go's text), waiting (every
// 5 s while a write is unanswered).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"
)

var out = struct {
	sync.Mutex
	enc *json.Encoder
}{enc: json.NewEncoder(os.Stdout)}

func emit(event string, fields map[string]any) {
	if fields == nil {
		fields = map[string]any{}
	}
	fields["ts"] = float64(time.Now().UnixNano()) / 1e9
	fields["event"] = event
	out.Lock()
	defer out.Unlock()
	_ = out.enc.Encode(fields)
}

func main() {
	brokers := flag.String("brokers", "", "bootstrap list host:port,... (every broker, dead ones included)")
	topic := flag.String("topic", "t", "topic")
	rate := flag.Float64("rate", 5, "batches per second")
	batch := flag.Int("batch", 5, "messages per WriteMessages call")
	flag.Parse()
	if *brokers == "" {
		fmt.Fprintln(os.Stderr, "kafkago-incident: -brokers is required")
		os.Exit(2)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	w := &kafka.Writer{
		Addr:         kafka.TCP(strings.Split(*brokers, ",")...),
		Topic:        *topic,
		RequiredAcks: kafka.RequireAll,
	}
	defer w.Close()
	emit("start", map[string]any{"client": "kafka-go"})
	acked := 0
	tick := time.NewTicker(time.Duration(float64(time.Second) / *rate))
	defer tick.Stop()
	for b := 0; ; b++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		msgs := make([]kafka.Message, *batch)
		for i := range msgs {
			msgs[i] = kafka.Message{Value: []byte(fmt.Sprintf("b%d-m%d", b, i))}
		}
		done := make(chan struct{})
		go waiting(done, *batch)
		err := w.WriteMessages(ctx, msgs...)
		close(done)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			emit("error", map[string]any{"error": err.Error()})
			continue
		}
		acked += len(msgs)
		emit("ack", map[string]any{"n": acked})
	}
}

// waiting reports every 5 s that `pending` messages are still unanswered, until done.
func waiting(done chan struct{}, pending int) {
	started := time.Now()
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			emit("waiting", map[string]any{
				"pending": pending, "since_send_s": time.Since(started).Seconds(),
			})
		}
	}
}
