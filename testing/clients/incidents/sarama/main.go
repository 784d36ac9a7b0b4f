// Command sarama-incident replays the sarama incidents S0 and S2, and IBM/sarama issue 2150,
// with sarama itself at the version its version file pins (go.mod: v1.37.2; v1.38.0.mod:
// v1.38.0, S2's fixed control; v1.31.0.mod, v1.32.0.mod: issue 2150's affected releases;
// v1.33.0.mod: its fix). No hangwatch code: it only produces and reports what sarama
// answered.
//
//	-mode sync: S0. A SyncProducer (Retry.Max=1, Net.WriteTimeout=3s, the rest
//	  sarama's defaults), one message at a time at -rate per second.
//	-mode idempotent: S2. An idempotent AsyncProducer (Idempotent=true,
//	  RequiredAcks=WaitForAll, Net.MaxOpenRequests=1, Retry.Max=3), fed batches of
//	  -batch messages; the next batch goes only when every message of the last one has
//	  been answered (what SyncProducer.SendMessages does).
//	-mode concurrent: issue 2150. A SyncProducer with sarama's defaults (Net.MaxOpenRequests
//	  5, Retry.Max 3; Version 2.1.0, the oldest Kafka 4 serves), -senders goroutines each
//	  sending one message at a time, -rate messages per second between them; sarama's
//	  log on stderr.
//
// -metadata-refresh: sarama's Metadata.RefreshFrequency (0: sarama's own, 10 minutes),
// so that its periodic refresh happens within a replay's watch.
//
// Every line on stdout is one JSON object: {"ts": unix seconds, "event": ...}; events:
// start, ack (n: messages acknowledged so far), error (error: sarama's text), waiting
// (every 5 s while a send is unanswered: pending, since_ack_s).
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/Shopify/sarama"
	"hangwatch.dev/incidents/progress"
)

func main() {
	brokers := flag.String("brokers", "", "bootstrap list host:port,...")
	topic := flag.String("topic", "t", "topic")
	mode := flag.String("mode", "sync", "sync (S0), idempotent (S2) or concurrent (issue 2150)")
	rate := flag.Float64("rate", 10, "messages (sync) or batches (idempotent) per second")
	batch := flag.Int("batch", 10, "messages per batch (idempotent)")
	senders := flag.Int("senders", 8, "goroutines sending at once (concurrent)")
	refresh := flag.Duration("metadata-refresh", 0, "Metadata.RefreshFrequency (0: sarama's default)")
	flag.Parse()
	if *brokers == "" {
		fmt.Fprintln(os.Stderr, "sarama-incident: -brokers is required")
		os.Exit(2)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	addrs := strings.Split(*brokers, ",")
	var err error
	switch *mode {
	case "sync":
		err = runSync(addrs, *topic, *rate, *refresh, stop)
	case "idempotent":
		err = runIdempotent(addrs, *topic, *rate, *batch, *refresh, stop)
	case "concurrent":
		err = runConcurrent(addrs, *topic, *rate, *senders, stop)
	default:
		err = fmt.Errorf("unknown -mode %q", *mode)
	}
	if err != nil {
		progress.Emit("fatal", map[string]any{"error": err.Error()})
		os.Exit(1)
	}
}

func interval(rate float64) time.Duration {
	return time.Duration(float64(time.Second) / rate)
}

// runSync is S0: a SyncProducer with Retry.Max=1 and Net.WriteTimeout=3s.
func runSync(addrs []string, topic string, rate float64, refresh time.Duration, stop chan os.Signal) error {
	cfg := sarama.NewConfig()
	if refresh > 0 {
		cfg.Metadata.RefreshFrequency = refresh
	}
	cfg.Version = sarama.V1_0_0_0
	cfg.Producer.Return.Successes = true
	cfg.Producer.Retry.Max = 1
	cfg.Net.WriteTimeout = 3 * time.Second
	producer, err := sarama.NewSyncProducer(addrs, cfg)
	if err != nil {
		return err
	}
	progress.Emit("start", map[string]any{"mode": "sync", "client": "sarama"})
	acked := 0
	tick := time.NewTicker(interval(rate))
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return producer.Close()
		case <-tick.C:
		}
		done := make(chan struct{})
		go progress.Waiting(done, 1)
		_, _, err := producer.SendMessage(&sarama.ProducerMessage{
			Topic: topic, Value: sarama.StringEncoder(fmt.Sprintf("m%d", i)),
		})
		close(done)
		if err != nil {
			progress.Emit("error", map[string]any{"error": err.Error()})
			continue
		}
		acked++
		progress.Emit("ack", map[string]any{"n": acked})
	}
}

// runIdempotent is S2: an idempotent AsyncProducer answering whole batches.
func runIdempotent(addrs []string, topic string, rate float64, batch int, refresh time.Duration, stop chan os.Signal) error {
	cfg := sarama.NewConfig()
	if refresh > 0 {
		cfg.Metadata.RefreshFrequency = refresh
	}
	cfg.Version = sarama.V2_0_0_0
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.Flush.Messages = batch
	cfg.Producer.Flush.Frequency = 10 * time.Millisecond
	// A fresh cluster may still be loading its transaction coordinator: creating an
	// idempotent producer (InitProducerId) fails until it is ready, so try for 60 s, as a
	// service's restart loop would.
	var producer sarama.AsyncProducer
	var err error
	for attempt := 0; attempt < 60; attempt++ {
		if producer, err = sarama.NewAsyncProducer(addrs, cfg); err == nil {
			break
		}
		progress.Emit("init_retry", map[string]any{"error": err.Error()})
		time.Sleep(time.Second)
	}
	if err != nil {
		return err
	}
	progress.Emit("start", map[string]any{"mode": "idempotent", "client": "sarama"})
	acked := 0
	tick := time.NewTicker(interval(rate))
	defer tick.Stop()
	for b := 0; ; b++ {
		select {
		case <-stop:
			producer.AsyncClose()
			return nil
		case <-tick.C:
		}
		for i := 0; i < batch; i++ {
			producer.Input() <- &sarama.ProducerMessage{
				Topic: topic, Key: sarama.StringEncoder(fmt.Sprintf("k%d", b)),
				Value: sarama.StringEncoder(fmt.Sprintf("b%d-m%d", b, i)),
			}
		}
		done := make(chan struct{})
		answered := 0
		go progress.Waiting(done, batch)
		for answered < batch {
			select {
			case <-stop:
				close(done)
				producer.AsyncClose()
				return nil
			case <-producer.Successes():
				acked++
				progress.Emit("ack", map[string]any{"n": acked})
			case perr := <-producer.Errors():
				progress.Emit("error", map[string]any{"error": perr.Err.Error()})
			}
			answered++
		}
		close(done)
	}
}

// runConcurrent is issue 2150: a SyncProducer with sarama's defaults shared by `senders`
// goroutines, so that several requests are in flight to a broker at once.
func runConcurrent(addrs []string, topic string, rate float64, senders int, stop chan os.Signal) error {
	if senders < 1 {
		return fmt.Errorf("-senders must be at least 1, got %d", senders)
	}
	sarama.Logger = log.New(os.Stderr, "sarama ", log.LstdFlags|log.Lmicroseconds)
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_1_0_0
	cfg.Producer.Return.Successes = true
	producer, err := sarama.NewSyncProducer(addrs, cfg)
	if err != nil {
		return err
	}
	progress.Emit("start", map[string]any{"mode": "concurrent", "client": "sarama", "senders": senders})
	var mu sync.Mutex
	acked := 0
	each := interval(rate / float64(senders))
	for s := 0; s < senders; s++ {
		go func(s int) {
			tick := time.NewTicker(each)
			defer tick.Stop()
			for i := 0; ; i++ {
				<-tick.C
				done := make(chan struct{})
				go progress.Waiting(done, 1)
				_, _, err := producer.SendMessage(&sarama.ProducerMessage{
					Topic: topic, Value: sarama.StringEncoder(fmt.Sprintf("s%d-m%d", s, i)),
				})
				close(done)
				if err != nil {
					progress.Emit("error", map[string]any{"error": err.Error()})
					continue
				}
				mu.Lock()
				acked++
				n := acked
				mu.Unlock()
				progress.Emit("ack", map[string]any{"n": n})
			}
		}(s)
	}
	<-stop
	return nil // no Close: a producer stuck by the bug would block it
}
