// CONSTRUCTED: see ../../../README.md
package constructed.user;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.spark.sql.api.java.UDF1;

/**
 * A Spark Java UDF run by executor task threads: a negative value starts (once per JVM)
 * a producer whose I/O thread wedges in its delivery callback; a positive one makes this
 * task's send wait that many seconds for metadata; 0 returns at once.
 */
public class WedgeUdf implements UDF1<Long, Long> {
    private static KafkaProducer wedged;

    private static synchronized KafkaProducer producer() {
        if (wedged == null) {
            DeliveryCallback callback = new DeliveryCallback();
            wedged = new KafkaProducer("constructed-1", callback);
            callback.producer = wedged;
        }
        return wedged;
    }

    @Override
    public Long call(Long value) throws Exception {
        if (value < 0) {
            producer();
        } else if (value > 0) {
            producer().send(value);
        }
        return value;
    }
}
