/*
 * The field corpus's Java producer (no hangwatch code), compiled against each kafka-clients
 * release a report names (one pom per release beside it).
 *
 *   java -cp <classes>:<jars> FieldProducer BOOTSTRAP TOPIC RATE [property=value ...]
 *
 * A KafkaProducer with the client's own defaults but the properties given (e.g.
 * delivery.timeout.ms, so that a batch it cannot deliver fails within one watch), String
 * keys and values; RATE sends a second, each with its own key (so over every partition),
 * the result reported by the send's callback, which only prints (nothing blocks the I/O
 * thread). A send that throws (metadata not available within max.block.ms) is an error
 * line, and the next send follows.
 *
 * stdout: one JSON object per line, {"ts": unix seconds, "event": ...}: start, ack (n),
 * error (the client's exception text), fatal (the producer could not be made).
 */
import java.util.Arrays;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;

public final class FieldProducer {
    private static final AtomicLong ACKED = new AtomicLong();

    private static final String STRINGS = "org.apache.kafka.common.serialization.StringSerializer";

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        for (String setting : Arrays.copyOfRange(args, 3, args.length)) {
            int eq = setting.indexOf('=');
            props.put(setting.substring(0, eq), setting.substring(eq + 1));
        }
        props.put("bootstrap.servers", args[0]);
        props.put("key.serializer", STRINGS);
        props.put("value.serializer", STRINGS);
        KafkaProducer<String, String> producer;
        try {
            producer = new KafkaProducer<>(props);
        } catch (Exception e) {
            Throwable cause = e.getCause() != null ? e.getCause() : e;
            Progress.emit("fatal", "error", Progress.quoted(e + ": " + cause));
            System.exit(2);
            return;
        }
        Callback callback = (metadata, exception) -> {
            if (exception != null) {
                Progress.emit("error", "error", Progress.quoted(exception));
            } else {
                Progress.emit("ack", "n", Long.toString(ACKED.incrementAndGet()));
            }
        };
        // the release, from the jar the class came from (kafka-clients-<release>.jar)
        String jar = KafkaProducer.class.getProtectionDomain().getCodeSource().getLocation().getPath();
        String release = jar.replaceAll(".*/kafka-clients-(.*)\\.jar$", "$1");
        Progress.emit("start", "client", Progress.quoted("kafka-clients " + release));
        String topic = args[1];
        Pace pace = new Pace(Double.parseDouble(args[2]));
        for (long i = 0; ; i++) {
            pace.await();
            try {
                producer.send(new ProducerRecord<>(topic, "k" + i, "v" + i), callback);
            } catch (Exception e) {
                Progress.emit("error", "error", Progress.quoted(e));
            }
        }
    }
}
