// CONSTRUCTED (not the Kafka client): see ../../../../../../README.md
package org.apache.kafka.common.utils;

public class KafkaThread extends Thread {
    public KafkaThread(String name, Runnable runnable, boolean daemon) {
        super(runnable, name);
        setDaemon(daemon);
    }
}
