// CONSTRUCTED (not the Kafka client): see ../../../../../../../README.md
package org.apache.kafka.clients.producer.internals;

import java.util.concurrent.CountDownLatch;

public class ProduceRequestResult {
    private final CountDownLatch latch = new CountDownLatch(1);

    public void await() throws InterruptedException {
        latch.await();
    }
}
