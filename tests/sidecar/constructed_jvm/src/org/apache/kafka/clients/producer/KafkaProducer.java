// CONSTRUCTED (not the Kafka client): see ../../../../../../README.md
package org.apache.kafka.clients.producer;

import org.apache.kafka.clients.producer.internals.FutureRecordMetadata;
import org.apache.kafka.clients.producer.internals.ProducerMetadata;
import org.apache.kafka.clients.producer.internals.Sender;
import org.apache.kafka.common.utils.KafkaThread;

/** Only the names of the real client's send path; nothing is produced. */
public class KafkaProducer {
    private final ProducerMetadata metadata = new ProducerMetadata();
    private final FutureRecordMetadata result = new FutureRecordMetadata();

    /** Starts the I/O thread, which completes a batch and fires `callback` on itself. */
    public KafkaProducer(String clientId, Callback callback) {
        Sender sender = new Sender(callback);
        new KafkaThread("kafka-producer-network-thread | " + clientId, sender, true).start();
    }

    /** A send whose topic metadata never arrives: waits up to `seconds`. */
    public void send(long seconds) throws InterruptedException {
        doSend(seconds);
    }

    private void doSend(long seconds) throws InterruptedException {
        waitOnMetadata(seconds);
    }

    private void waitOnMetadata(long seconds) throws InterruptedException {
        metadata.awaitUpdate(seconds * 1000L);
    }

    /** A synchronous send: the result only the I/O thread could complete. */
    public Object sendAndGet() throws InterruptedException {
        return result.get();
    }
}
