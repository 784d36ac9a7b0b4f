/*
 * S4 replayed with the Java producer of kafka-clients 0.11.0.3 (no hangwatch code).
 *
 *   java -cp <classes>:<kafka-clients jars> S4Producer BOOTSTRAP TOPIC RATE TRIGGER_FILE
 *
 * Sends RATE messages per second of 1 KiB (max.block.ms=10000 as in the write-up,
 * buffer.memory=1048576 so that a stalled producer fills it in seconds instead of the
 * default 32 MiB's minutes). Its delivery callback reports each acknowledgement; once
 * TRIGGER_FILE exists, the callback also sends an audit record and waits for it with
 * send(...).get(), no timeout: the write-up's code. Callbacks run on the producer's one
 * I/O thread, which then waits for itself.
 *
 * stdout: one JSON object per line, {"ts": unix seconds, "event": ...}: start, ack (n),
 * sync_send (the callback's synchronous send begins), error (the client's exception text).
 */
import java.io.File;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;

public final class S4Producer {
    private static final AtomicLong ACKED = new AtomicLong();

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        double rate = Double.parseDouble(args[2]);
        File trigger = new File(args[3]);
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("acks", "all");
        props.put("max.block.ms", "10000");
        props.put("buffer.memory", "1048576");
        props.put("key.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        props.put("value.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        final KafkaProducer<String, String> producer = new KafkaProducer<>(props);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> System.out.flush()));
        String value = new String(new char[1024]).replace('\0', 'x');
        Callback callback = new Callback() {
            @Override
            public void onCompletion(RecordMetadata metadata, Exception exception) {
                if (exception != null) {
                    Progress.emit("error", "error", Progress.quoted(exception));
                    return;
                }
                Progress.emit("ack", "n", Long.toString(ACKED.incrementAndGet()));
                if (trigger.exists()) {
                    Progress.emit("sync_send");
                    try {
                        producer.send(new ProducerRecord<>(topic, "audit", "audit")).get();
                    } catch (Exception e) {
                        Progress.emit("error", "error", Progress.quoted(e));
                    }
                }
            }
        };
        Progress.emit("start", "client", Progress.quoted("kafka-clients 0.11.0.3"));
        Pace pace = new Pace(rate);
        for (long i = 0; ; i++) {
            pace.await();
            try {
                producer.send(new ProducerRecord<>(topic, "k" + i, value), callback);
            } catch (Exception e) {
                Progress.emit("error", "error", Progress.quoted(e));
            }
        }
    }
}
