// CONSTRUCTED (not the Kafka client): see ../../../../../../../README.md
package org.apache.kafka.clients.producer.internals;

import org.apache.kafka.clients.producer.Callback;

public class ProducerBatch {
    private final Callback callback;

    ProducerBatch(Callback callback) {
        this.callback = callback;
    }

    void done() {
        completeFutureAndFireCallbacks();
    }

    private void completeFutureAndFireCallbacks() {
        callback.onCompletion(null, new RuntimeException("constructed: a failed batch"));
    }
}
