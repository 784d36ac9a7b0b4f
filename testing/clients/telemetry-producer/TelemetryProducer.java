/*
 * A plain Java KafkaProducer with hangwatch's telemetry loaded (hangwatch_pipeline.kafka_telemetry),
 * for tests/pipeline/test_kafka_telemetry_jar.py:
 *
 *   java -cp kafka-clients.jar:slf4j-api.jar:hangwatch-kafka-telemetry.jar:this.jar \
 *       TelemetryProducer BOOTSTRAP TOPIC COUNT VALUE_BYTES [key=value ...]
 *
 * Sends COUNT records of VALUE_BYTES bytes to TOPIC (the extra properties are the
 * producer's: a SASL login, linger.ms, delivery.timeout.ms), flushes, prints
 * "sent <acknowledged> <failed>", then waits for a line on stdin before it closes the
 * producer and prints "closed" (the test reads the telemetry files meanwhile).
 */
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;

public class TelemetryProducer {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("key.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
        props.put("value.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
        props.put("interceptor.classes", "dev.hangwatch.kafka.HangwatchTelemetry");
        props.put("metric.reporters", "dev.hangwatch.kafka.HangwatchTelemetry");
        for (String assignment : Arrays.copyOfRange(args, 4, args.length)) {
            int eq = assignment.indexOf('=');
            props.put(assignment.substring(0, eq), assignment.substring(eq + 1));
        }
        String topic = args[1];
        int count = Integer.parseInt(args[2]);
        byte[] value = new byte[Integer.parseInt(args[3])];
        Arrays.fill(value, (byte) 'x');
        AtomicLong ok = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props);
        for (int i = 0; i < count; i++) {
            byte[] key = Integer.toString(i).getBytes(StandardCharsets.UTF_8);
            producer.send(new ProducerRecord<>(topic, key, value), (metadata, exception) -> {
                (exception == null ? ok : failed).incrementAndGet();
            });
        }
        producer.flush();
        System.out.println("sent " + ok.get() + " " + failed.get());
        System.out.flush();
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
        producer.close();
        System.out.println("closed");
        System.out.flush();
    }
}
