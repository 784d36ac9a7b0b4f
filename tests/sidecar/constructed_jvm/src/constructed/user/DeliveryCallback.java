// CONSTRUCTED user code (S4's mistake): see ../../../README.md
package constructed.user;

import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;

/** On a failed send, sends again synchronously: on the I/O thread, it waits for itself. */
public class DeliveryCallback implements Callback {
    volatile KafkaProducer producer;

    @Override
    public void onCompletion(Object metadata, Exception exception) {
        if (exception == null) {
            return;
        }
        try {
            while (producer == null) {
                Thread.sleep(10);
            }
            producer.sendAndGet();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
