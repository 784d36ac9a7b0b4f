// CONSTRUCTED (not the Kafka client): see ../../../../../../README.md
package org.apache.kafka.clients.producer;

public interface Callback {
    void onCompletion(Object metadata, Exception exception);
}
