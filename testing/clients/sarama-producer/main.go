// A sarama producer as a new user writes one: the client of incidents S0 and S2.
//
// Built from Debian's golang-github-shopify-sarama-dev (sarama 1.22.1) in GOPATH mode by
// hangwatch_testing.clients.build. It sends -rate messages per second with a
// SyncProducer (each SendMessage blocks until the broker answers or sarama gives up),
// alternating -burst seconds of sending with -idle seconds of silence when both are set,
// and prints "ok <delivered>" every second and "error <reason>" for every failed send.
// Default sarama settings except where a flag says otherwise: what a user gets.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/Shopify/sarama"
)

func main() {
	brokers := flag.String("brokers", "", "comma-separated bootstrap list")
	topic := flag.String("topic", "", "topic to write")
	rate := flag.Float64("rate", 20, "messages per second")
	burst := flag.Float64("burst", 0, "seconds of sending per cycle (0: always)")
	idle := flag.Float64("idle", 0, "seconds of silence per cycle")
	flag.Parse()

	config := sarama.NewConfig()
	config.Version = sarama.V1_0_0_0
	config.Producer.Return.Successes = true
	config.Producer.RequiredAcks = sarama.WaitForAll
	producer, err := sarama.NewSyncProducer(strings.Split(*brokers, ","), config)
	if err != nil {
		fmt.Printf("error start: %v\n", err)
		os.Exit(1)
	}
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
		msg := &sarama.ProducerMessage{Topic: *topic, Value: sarama.StringEncoder(fmt.Sprintf("m%d", i))}
		if _, _, err := producer.SendMessage(msg); err != nil {
			fmt.Printf("error %v\n", err)
		} else {
			atomic.AddInt64(&delivered, 1)
		}
		time.Sleep(time.Duration(float64(time.Second) / *rate))
	}
}
