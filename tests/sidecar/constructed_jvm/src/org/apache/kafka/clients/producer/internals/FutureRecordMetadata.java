// CONSTRUCTED (not the Kafka client): see ../../../../../../../README.md
package org.apache.kafka.clients.producer.internals;

public class FutureRecordMetadata {
    private final ProduceRequestResult result = new ProduceRequestResult();

    /** Waits, without a timeout, for a result nobody will complete. */
    public Object get() throws InterruptedException {
        result.await();
        return null;
    }
}
