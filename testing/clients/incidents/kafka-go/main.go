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
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"
	"hangwatch.dev/incidents/progress"
)

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
	progress.Emit("start", map[string]any{"client": "kafka-go"})
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
		go progress.Waiting(done, *batch)
		err := w.WriteMessages(ctx, msgs...)
		close(done)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			progress.Emit("error", map[string]any{"error": err.Error()})
			continue
		}
		acked += len(msgs)
		progress.Emit("ack", map[string]any{"n": acked})
	}
}

