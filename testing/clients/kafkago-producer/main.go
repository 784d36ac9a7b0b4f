// A segmentio kafka-go producer as a new user writes one: the client of incident S1.
//
// Built from Debian's golang-github-segmentio-kafka-go-dev (kafka-go 0.2.1) in GOPATH
// mode by hangwatch_testing.clients.build. It writes -rate messages per second with a
// Writer (WriteMessages blocks until the batch is written or the writer gives up),
// alternating -burst seconds of sending with -idle seconds of silence when both are set,
// and prints "ok <delivered>" every second and "error <reason>" for every failed write.
// Default kafka-go settings: what a user gets.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	kafka "github.com/segmentio/kafka-go"
)

func main() {
	brokers := flag.String("brokers", "", "comma-separated bootstrap list")
	topic := flag.String("topic", "", "topic to write")
	rate := flag.Float64("rate", 20, "messages per second")
	burst := flag.Float64("burst", 0, "seconds of sending per cycle (0: always)")
	idle := flag.Float64("idle", 0, "seconds of silence per cycle")
	flag.Parse()

	writer := kafka.NewWriter(kafka.WriterConfig{
		Brokers:      strings.Split(*brokers, ","),
		Topic:        *topic,
		BatchTimeout: 10 * time.Millisecond,
	})
	var delivered int64
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		for range time.Tick(time.Second) {
			fmt.Printf("ok %d\n", atomic.LoadInt64(&delivered))
		}
	}()
	go func() {
		<-stop
		os.Exit(0)
	}()
	started := time.Now()
	cycle := *burst + *idle
	for i := 0; ; i++ {
		if cycle > 0 {
			for float64(time.Since(started)/time.Millisecond)/1000.0 - cycle*float64(int(time.Since(started).Seconds()/cycle)) >= *burst {
				time.Sleep(50 * time.Millisecond)
			}
		}
		err := writer.WriteMessages(context.Background(), kafka.Message{Value: []byte(fmt.Sprintf("m%d", i))})
		if err != nil {
			fmt.Printf("error %v\n", err)
		} else {
			atomic.AddInt64(&delivered, 1)
		}
		time.Sleep(time.Duration(float64(time.Second) / *rate))
	}
}
