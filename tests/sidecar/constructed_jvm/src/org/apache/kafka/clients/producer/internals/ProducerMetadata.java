// CONSTRUCTED (not the Kafka client): see ../../../../../../../README.md
package org.apache.kafka.clients.producer.internals;

public class ProducerMetadata {
    /** Waits on this object's monitor for an update that never comes, up to `maxMs`. */
    public synchronized void awaitUpdate(long maxMs) throws InterruptedException {
        long end = System.currentTimeMillis() + maxMs;
        long left;
        while ((left = end - System.currentTimeMillis()) > 0) {
            wait(left);
        }
    }
}
