// Command kafkago03-incident replays segmentio/kafka-go issue 451 ("Producer stuck on TCP
// connection error") with kafka-go at the version its version file pins (go.mod: v0.3.6,
// the affected release; v0.3.5.mod: the release the report suspected; v0.3.7.mod: the
// fix). No hangwatch code: it only produces and reports what kafka-go answered.
//
// As in the report: a Writer built by kafka.NewWriter with the bootstrap list and the topic,
// every other setting kafka-go's default (round-robin balancer, MaxAttempts 10, batches
// flushed every second, RequiredAcks -1), its Logger and ErrorLogger writing to stderr.
// Each -rate tick it writes one batch of -batch messages with Writer.WriteMessages, which
// returns once every message is acknowledged or has failed. Every line on stdout is one
// JSON object {"ts", "event", ...}: start, ack (n: messages acknowledged so far), error
// (kafka-go's text), waiting (every 5 s while a write is unanswered).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"
	"hangwatch.dev/incidents/progress"
)

func main() {
	brokers := flag.String("brokers", "", "bootstrap list host:port,...")
	topic := flag.String("topic", "t", "topic")
	rate := flag.Float64("rate", 1, "WriteMessages calls per second")
	batch := flag.Int("batch", 1, "messages per WriteMessages call")
	flag.Parse()
	if *brokers == "" || *rate <= 0 || *batch <= 0 {
		fmt.Fprintln(os.Stderr, "kafkago03-incident: -brokers is required, -rate and -batch must be > 0")
		os.Exit(2)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	logger := log.New(os.Stderr, "kafka-go ", log.LstdFlags|log.Lmicroseconds)
	w := kafka.NewWriter(kafka.WriterConfig{
		Brokers:     strings.Split(*brokers, ","),
		Topic:       *topic,
		Logger:      logger,
		ErrorLogger: logger,
	})
	progress.Emit("start", map[string]any{"client": "kafka-go"})
	acked := 0
	tick := time.NewTicker(time.Duration(float64(time.Second) / *rate))
	defer tick.Stop()
	for b := 0; ; b++ {
		select {
		case <-ctx.Done():
			return // no Close: a writer stuck by the bug would block it
		case <-tick.C:
		}
		msgs := make([]kafka.Message, *batch)
		for i := range msgs {
			msgs[i] = kafka.Message{Key: []byte("Key"), Value: []byte(fmt.Sprintf("b%d-m%d", b, i))}
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
