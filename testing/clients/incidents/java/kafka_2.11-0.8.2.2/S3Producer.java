/*
 * S3 replayed with the old Scala producer of Kafka 0.8.2.2 (no hangwatch code).
 *
 *   java -cp <classes>:<kafka_2.11 0.8.2.2 jars> S3Producer BROKER_LIST TOPIC RATE REFRESH_MS
 *
 * kafka.javaapi.producer.Producer, producer.type=sync, request.required.acks=1,
 * metadata.broker.list = every broker (the dead one too), the client's defaults otherwise
 * (request.timeout.ms 10000, the connect timeout of its BlockingChannel).
 * topic.metadata.refresh.interval.ms is REFRESH_MS (the write-up: the default 600000;
 * a test passes less so that several periodic refreshes happen within a run).
 * Sends RATE messages per second, one send() each, timing each.
 *
 * stdout: one JSON object per line, {"ts": unix seconds, "event": ...}: start, ack (n,
 * send_ms: how long that send() took), error (the client's exception text).
 */
import java.util.Properties;
import kafka.javaapi.producer.Producer;
import kafka.producer.KeyedMessage;
import kafka.producer.ProducerConfig;

public final class S3Producer {
    public static void main(String[] args) throws Exception {
        String brokers = args[0], topic = args[1];
        double rate = Double.parseDouble(args[2]);
        Properties props = new Properties();
        props.put("metadata.broker.list", brokers);
        props.put("serializer.class", "kafka.serializer.StringEncoder");
        props.put("producer.type", "sync");
        props.put("request.required.acks", "1");
        props.put("topic.metadata.refresh.interval.ms", args[3]);
        Producer<String, String> producer = new Producer<>(new ProducerConfig(props));
        Progress.emit("start", "client", Progress.quoted("kafka_2.11 0.8.2.2"));
        Pace pace = new Pace(rate);
        long acked = 0;
        for (long i = 0; ; i++) {
            pace.await();
            long started = System.nanoTime();
            try {
                producer.send(new KeyedMessage<>(topic, "k" + i, "m" + i));
                long ms = (System.nanoTime() - started) / 1_000_000;
                Progress.emit("ack", "n", Long.toString(++acked), "send_ms", Long.toString(ms));
            } catch (Exception e) {
                Progress.emit("error", "error", Progress.quoted(e));
            }
        }
    }
}
