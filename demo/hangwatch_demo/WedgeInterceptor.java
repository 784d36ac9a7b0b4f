/*
 * A Kafka ProducerInterceptor for the demo's Spark Kafka sink scenario `jvm-wedged-interceptor`
 * (hangwatch_demo.interceptor builds it; the connector loads it through the user's own
 * `kafka.interceptor.classes` option). Kafka calls `onAcknowledgement` on the producer's I/O
 * thread (`kafka-producer-network-thread`) for every acknowledged record. Once a file named
 * `wedge` exists in the executor's working directory (its JVM's current directory), that call
 * never returns: user code blocking the I/O thread - an interceptor that waits on I/O of its
 * own - which is seed S4's structure on the JVM producer Spark's sink shares between the tasks
 * of an executor. Other executors, and a replacement executor (a new working directory), are
 * not affected. Nothing of hangwatch runs here; hangwatch sees it in the executor's thread
 * dump only.
 */
package dev.hangwatch.demo;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.producer.ProducerInterceptor;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;

public class WedgeInterceptor implements ProducerInterceptor<Object, Object> {
    private static final Path WEDGE = Paths.get("wedge");
    private static final CountDownLatch NEVER = new CountDownLatch(1);

    @Override
    public ProducerRecord<Object, Object> onSend(ProducerRecord<Object, Object> record) {
        return record;
    }

    @Override
    public void onAcknowledgement(RecordMetadata metadata, Exception exception) {
        if (!Files.exists(WEDGE)) {
            return;
        }
        while (true) {  // blocks the I/O thread for good, as the seed's blocking call did
            try {
                NEVER.await();
            } catch (InterruptedException e) {
                // keep waiting: the executor's end (its process killed) is the way out
            }
        }
    }

    @Override
    public void close() {}

    @Override
    public void configure(Map<String, ?> configs) {}
}
