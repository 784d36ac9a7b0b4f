/*
 * A healthy Java producer on kafka-clients 3.9.2 (no hangwatch code): the control of the
 * local JVM thread dumps (a producer at work must never be called hung).
 *
 *   java -cp <classes>:<kafka-clients jars> HealthyProducer BOOTSTRAP TOPIC RATE
 *
 * Sends RATE messages per second of 1 KiB with a delivery callback (acks=all), and the
 * usual synchronous moments of a service: every 20th send waits for its result with
 * send(...).get() on the main thread, every 100th is followed by flush(). Callbacks only
 * report (nothing blocks the I/O thread).
 *
 * stdout: one JSON object per line, {"ts": unix seconds, "event": ...}: start, ack (n),
 * error (the client's exception text).
 */
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;

public final class HealthyProducer {
    private static final AtomicLong ACKED = new AtomicLong();

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        double rate = Double.parseDouble(args[2]);
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("acks", "all");
        props.put("key.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        props.put("value.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        KafkaProducer<String, String> producer = new KafkaProducer<>(props);
        String value = new String(new char[1024]).replace('\0', 'x');
        Callback callback = (metadata, exception) -> {
            if (exception != null) {
                Progress.emit("error", "error", Progress.quoted(exception));
            } else {
                Progress.emit("ack", "n", Long.toString(ACKED.incrementAndGet()));
            }
        };
        Progress.emit("start", "client", Progress.quoted("kafka-clients 3.9.2"));
        Pace pace = new Pace(rate);
        for (long i = 0; ; i++) {
            pace.await();
            try {
                ProducerRecord<String, String> record = new ProducerRecord<>(topic, "k" + i, value);
                if (i % 20 == 0) {
                    producer.send(record, callback).get();
                } else {
                    producer.send(record, callback);
                }
                if (i % 100 == 99) {
                    producer.flush();
                }
            } catch (Exception e) {
                Progress.emit("error", "error", Progress.quoted(e));
            }
        }
    }
}
