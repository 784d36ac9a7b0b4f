/*
 * A Spark Java UDF that puts a REAL Java Kafka producer (whatever kafka-clients jar is on
 * the executor's classpath) into the states the Spark view's thread-dump classifier must
 * recognise, so that the driver's thread dump of the executor can be recorded
 * (scripts/record_thread_dumps.py). No hangwatch code; nothing constructed: every Kafka
 * frame in the dump is the client's own.
 *
 * Input "STATE|BOOTSTRAP|TOPIC", one row per task:
 *   callback  - creates (once per JVM) producer "s4-callback" whose delivery callback calls
 *               producer.send(...).get() without a timeout (S4): its I/O thread waits for
 *               itself. The task then keeps sending: once buffer.memory is full it waits in
 *               BufferPool.allocate (max.block.ms 600 s).
 *   flush     - waits until "s4-callback" is wedged, then calls its flush(): waits forever.
 *   metadata  - producer "no-metadata" whose bootstrap is BOOTSTRAP (an address nothing
 *               answers): send() waits for the topic's metadata (max.block.ms 600 s).
 *   healthy   - producer "healthy" sending to BOOTSTRAP at 50 messages/s until cancelled
 *               (its I/O thread in its own loop).
 */
package dev.hangwatch.recording;

import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.spark.sql.api.java.UDF1;

public class ProducerStates implements UDF1<String, String> {
    private static Producer<String, String> wedged;
    private static final CountDownLatch WEDGED = new CountDownLatch(1);

    static Properties props(String bootstrap, String clientId) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("client.id", clientId);
        props.put("acks", "all");
        props.put("max.block.ms", "600000");
        props.put("buffer.memory", "262144");
        props.put("key.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        props.put("value.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        return props;
    }

    private static synchronized Producer<String, String> wedgedProducer(String bootstrap, String topic) {
        if (wedged == null) {
            final KafkaProducer<String, String> producer =
                new KafkaProducer<>(props(bootstrap, "s4-callback"));
            wedged = producer;
            producer.send(new ProducerRecord<>(topic, "first", "first"), (metadata, error) -> {
                WEDGED.countDown();
                try {
                    producer.send(new ProducerRecord<>(topic, "audit", "audit")).get();
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
        }
        return wedged;
    }

    @Override
    public String call(String input) throws Exception {
        String[] parts = input.split("\\|");
        String state = parts[0], bootstrap = parts[1], topic = parts[2];
        String value = new String(new char[1024]).replace('\0', 'x');
        switch (state) {
            case "callback": {
                Producer<String, String> producer = wedgedProducer(bootstrap, topic);
                WEDGED.await();
                for (long i = 0; ; i++) {
                    producer.send(new ProducerRecord<>(topic, "k" + i, value));
                }
            }
            case "flush": {
                WEDGED.await();
                wedgedProducer(bootstrap, topic).flush();
                return state;
            }
            case "metadata": {
                try (KafkaProducer<String, String> producer =
                         new KafkaProducer<>(props(bootstrap, "no-metadata"))) {
                    producer.send(new ProducerRecord<>(topic, "k", "v")).get();
                }
                return state;
            }
            case "healthy": {
                try (KafkaProducer<String, String> producer =
                         new KafkaProducer<>(props(bootstrap, "healthy"))) {
                    for (long i = 0; ; i++) {
                        producer.send(new ProducerRecord<>(topic, "k" + i, "v"));
                        Thread.sleep(20);
                    }
                }
            }
            default:
                throw new IllegalArgumentException("unknown state " + state);
        }
    }
}
