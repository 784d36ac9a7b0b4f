// CONSTRUCTED (not the Kafka client): see ../../../../../../../README.md
package org.apache.kafka.clients.producer.internals;

import org.apache.kafka.clients.producer.Callback;

/** The I/O loop's names: run -> runOnce -> a batch completes and fires its callback. */
public class Sender implements Runnable {
    private final ProducerBatch batch;

    public Sender(Callback callback) {
        this.batch = new ProducerBatch(callback);
    }

    @Override
    public void run() {
        runOnce();
    }

    void runOnce() {
        completeBatch();
    }

    private void completeBatch() {
        batch.done();
    }
}
