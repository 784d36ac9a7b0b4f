/*
 * hangwatch's telemetry for the Java Kafka client (Spark's own Kafka sink, or any JVM producer):
 * the producer's own account of its writes, in the telemetry document the hangwatch sidecar
 * reads (docs/telemetry.md, schema 1; the Python side is hangwatch_producer.wire.telemetry and
 * tests/pipeline/test_kafka_telemetry_jar.py checks that the constants below are its own).
 *
 * One class, loaded by the Java client twice: as a ProducerInterceptor
 * (`interceptor.classes`, Spark's sink: the `kafka.interceptor.classes` option), where it counts
 * every record sent, acknowledged and failed, with the Kafka error each failure names
 * (`Errors.forException`: RecordTooLargeException is MESSAGE_TOO_LARGE), and as a
 * MetricsReporter (`metric.reporters`), where it reads the client's own metrics: batches the
 * broker refused as too large and the client split (`batch-split-total`, which only a
 * MESSAGE_TOO_LARGE answer raises) and the throttle times a broker's quota gave it
 * (`produce-throttle-time-max`). Both instances of one producer meet through its `client.id`.
 *
 * Every second a daemon thread of its own ("hangwatch-telemetry", never the client's I/O thread)
 * writes each open producer's document to `$HANGWATCH_TELEMETRY_DIR/producer-<pid>-<n>.json`
 * (written to a hidden temporary file, then renamed over it) and holds
 * `producer-<pid>-<n>.lock` locked for the producer's life (a POSIX lock: the sidecar tests it
 * with fcntl as well as flock); both files go when the producer closes. Without the directory
 * it writes nothing and says so once. It never blocks a send or an acknowledgement (counters
 * and a small map under a short lock), never throws into the client, and never writes a
 * configured secret: error reasons have every password, secret or JAAS value replaced by
 * "[redacted]" and are cut to 256 characters.
 */
package dev.hangwatch.kafka;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.kafka.clients.producer.ProducerInterceptor;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.utils.AppInfoParser;

public class HangwatchTelemetry implements ProducerInterceptor<Object, Object>, MetricsReporter {
    // The telemetry contract (hangwatch_producer.wire.telemetry); a test compares them.
    static final int SCHEMA_VERSION = 1;
    static final String KIND = "hangwatch.producer.telemetry";
    static final String FILE_PREFIX = "producer-";
    static final String FILE_SUFFIX = ".json";
    static final String LOCK_SUFFIX = ".lock";
    static final String TEMP_SUFFIX = ".tmp";
    static final String DIR_ENV = "HANGWATCH_TELEMETRY_DIR";
    static final String DEFAULT_DIR = "/var/run/hangwatch/telemetry";
    static final int MAX_STRING = 256;
    static final int MAX_LIST = 100;
    static final String LIBRARY = "kafka-clients";
    static final String REPORTER_VERSION = "1";
    static final long INTERVAL_MS = 1000;
    static final String REDACTED = "[redacted]";

    private static final Map<String, Producer> PRODUCERS = new HashMap<>();
    private static final AtomicInteger NUMBERS = new AtomicInteger();
    private static ScheduledExecutorService writer;
    private static boolean toldNoDirectory;

    private Producer producer;

    // ---- both roles ----

    @Override
    public void configure(Map<String, ?> configs) {
        Object id = configs.get("client.id");
        String clientId = id == null ? "" : String.valueOf(id);
        producer = acquire(clientId, configs);
    }

    @Override
    public void close() {
        Producer p = producer;
        producer = null;
        if (p != null) {
            release(p);
        }
    }

    // ---- ProducerInterceptor ----

    @Override
    public ProducerRecord<Object, Object> onSend(ProducerRecord<Object, Object> record) {
        Producer p = producer;
        if (p != null) {
            p.sent(record.topic());
        }
        return record;
    }

    @Override
    public void onAcknowledgement(RecordMetadata metadata, Exception exception) {
        Producer p = producer;
        if (p == null) {
            return;
        }
        if (exception == null) {
            p.delivered();
        } else {
            p.failed(metadata == null ? "" : metadata.topic(), exception);
        }
    }

    // ---- MetricsReporter ----

    @Override
    public void init(List<KafkaMetric> metrics) {
        for (KafkaMetric metric : metrics) {
            metricChange(metric);
        }
    }

    @Override
    public void metricChange(KafkaMetric metric) {
        Producer p = producer;
        if (p != null && Producer.WATCHED.contains(metric.metricName().name())
                && "producer-metrics".equals(metric.metricName().group())) {
            p.metrics.put(metric.metricName().name(), metric);
        }
    }

    @Override
    public void metricRemoval(KafkaMetric metric) {
        Producer p = producer;
        if (p != null && "producer-metrics".equals(metric.metricName().group())) {
            p.metrics.remove(metric.metricName().name(), metric);
        }
    }

    // ---- the registry and the writer thread ----

    private static synchronized Producer acquire(String clientId, Map<String, ?> configs) {
        Producer p = PRODUCERS.get(clientId);
        if (p == null) {
            Path dir = directory();
            if (dir == null) {
                return null;
            }
            p = new Producer(clientId, NUMBERS.incrementAndGet(), dir, configs);
            if (!p.open()) {
                return null;
            }
            PRODUCERS.put(clientId, p);
            if (writer == null) {
                ScheduledThreadPoolExecutor pool = new ScheduledThreadPoolExecutor(1, runnable -> {
                    Thread thread = new Thread(runnable, "hangwatch-telemetry");
                    thread.setDaemon(true);
                    return thread;
                });
                pool.setExecuteExistingDelayedTasksAfterShutdownPolicy(false);
                writer = pool;
                writer.scheduleAtFixedRate(
                        HangwatchTelemetry::writeAll, INTERVAL_MS, INTERVAL_MS, TimeUnit.MILLISECONDS);
            }
        }
        p.refs++;
        return p;
    }

    private static synchronized void release(Producer p) {
        if (--p.refs > 0) {
            return;
        }
        PRODUCERS.remove(p.clientId, p);
        p.close();
        if (PRODUCERS.isEmpty() && writer != null) {
            writer.shutdown();
            writer = null;
        }
    }

    private static void writeAll() {
        List<Producer> open;
        synchronized (HangwatchTelemetry.class) {
            open = new ArrayList<>(PRODUCERS.values());
        }
        for (Producer p : open) {
            try {
                p.write();
            } catch (RuntimeException | IOException e) {
                p.problem("cannot write its telemetry: " + e);
            }
        }
    }

    private static Path directory() {
        String given = System.getenv(DIR_ENV);
        Path dir = Paths.get(given == null || given.isEmpty() ? DEFAULT_DIR : given);
        if (Files.isDirectory(dir) && Files.isWritable(dir)) {
            return dir;
        }
        if (!toldNoDirectory) {
            toldNoDirectory = true;
            warn("telemetry directory missing or not writable: nothing is written", null,
                    dir + " (" + DIR_ENV + ")");
        }
        return null;
    }

    /** One structured line on the JVM's stderr (the executor's log): what, for which producer. */
    static void warn(String message, String clientId, String directory) {
        Json line = new Json();
        line.open().field("ts", System.currentTimeMillis() / 1000.0).field("level", "warning");
        line.field("logger", "hangwatch.kafka_telemetry").field("msg", message);
        line.field("client_id", clientId).field("directory", directory);
        line.field("executor_id", System.getenv("SPARK_EXECUTOR_ID"));
        line.field("pod", System.getenv("HANGWATCH_POD_NAME")).close();
        System.err.println(line);
    }

    static long pid() {
        String name = ManagementFactory.getRuntimeMXBean().getName();  // "<pid>@<host>" (Java 8)
        int at = name.indexOf('@');
        try {
            return Long.parseLong(at > 0 ? name.substring(0, at) : name);
        } catch (NumberFormatException e) {
            return 0;
        }
    }

    /** Kafka's name of the error an exception stands for (its cause's when it names none). */
    static String code(Throwable exception) {
        Errors error = Errors.forException(exception);
        if (error == Errors.UNKNOWN_SERVER_ERROR && exception.getCause() != null) {
            error = Errors.forException(exception.getCause());
        }
        return error.name();
    }

    /** One producer's account (shared by its interceptor and its metrics reporter). */
    static final class Producer {
        static final java.util.Set<String> WATCHED = new java.util.HashSet<>(
                java.util.Arrays.asList("batch-split-total", "produce-throttle-time-max"));
        private static final Pattern QUOTED_SECRET =
                Pattern.compile("(password|secret|token)=\"([^\"]*)\"", Pattern.CASE_INSENSITIVE);

        final String clientId;
        final int number;
        final Path json;
        final Path temp;
        final Path lock;
        final long startedMs = System.currentTimeMillis();
        final long pid = pid();
        final List<String> bootstrap = new ArrayList<>();
        final List<String> secrets = new ArrayList<>();
        final Integer acks;
        final Map<String, KafkaMetric> metrics = new java.util.concurrent.ConcurrentHashMap<>();
        int refs;

        private final AtomicLong enqueued = new AtomicLong();
        private final AtomicLong delivered = new AtomicLong();
        private final AtomicLong failed = new AtomicLong();
        private volatile long lastDeliveryMs;
        private volatile boolean acknowledgements;
        // guarded by this
        private final TreeSet<String> topics = new TreeSet<>();
        private final LinkedHashMap<String, ErrorSeen> errors = new LinkedHashMap<>();
        private final Map<String, Long> errorCounts = new HashMap<>();
        private String lastCode;
        private String lastReason;
        private long lastErrorMs;
        // the writer thread's own
        private long seq;
        private double splits;
        private long splitsFirstMs;
        private long splitsLastMs;
        private long throttleCount;
        private long throttleLastMs;
        private double throttleLastSeconds;
        private FileChannel lockChannel;
        private FileLock held;
        private boolean toldProblem;
        private final Object files = new Object();
        // guarded by files
        private boolean closed;

        Producer(String clientId, int number, Path dir, Map<String, ?> configs) {
            this.clientId = clientId;
            this.number = number;
            String name = FILE_PREFIX + pid + "-" + number;
            json = dir.resolve(name + FILE_SUFFIX);
            temp = dir.resolve("." + name + FILE_SUFFIX + TEMP_SUFFIX);
            lock = dir.resolve(name + LOCK_SUFFIX);
            acks = acksOf(configs);
            Object servers = configs.get("bootstrap.servers");
            if (servers instanceof List) {
                for (Object s : (List<?>) servers) {
                    bootstrap.add(String.valueOf(s));
                }
            } else if (servers != null) {
                for (String s : String.valueOf(servers).split(",")) {
                    if (!s.trim().isEmpty()) {
                        bootstrap.add(s.trim());
                    }
                }
            }
            for (Map.Entry<String, ?> e : configs.entrySet()) {
                String key = e.getKey().toLowerCase(java.util.Locale.ROOT);
                if (e.getValue() != null && (key.contains("password") || key.contains("secret")
                        || key.contains("jaas") || key.endsWith(".key") || key.contains("token"))) {
                    String value = e.getValue() instanceof org.apache.kafka.common.config.types.Password
                            ? ((org.apache.kafka.common.config.types.Password) e.getValue()).value()
                            : String.valueOf(e.getValue());
                    if (!value.isEmpty()) {
                        secrets.add(value);
                        Matcher m = QUOTED_SECRET.matcher(value);
                        while (m.find()) {
                            if (!m.group(2).isEmpty()) {
                                secrets.add(m.group(2));
                            }
                        }
                    }
                }
            }
        }

        /** The client's acks as the telemetry's {@code acks} carries it: -1 for all (an
         * idempotent producer's always), else the number; null when its settings do not say
         * (the client's default applies) or say nothing usable. */
        static Integer acksOf(Map<String, ?> configs) {
            Object idempotence = configs.get("enable.idempotence");
            if (idempotence != null && "true".equalsIgnoreCase(String.valueOf(idempotence).trim())) {
                return -1;
            }
            Object value = configs.get("acks");
            if (value == null) {
                return null;
            }
            String text = String.valueOf(value).trim();
            if ("all".equalsIgnoreCase(text)) {
                return -1;
            }
            try {
                int number = Integer.parseInt(text);
                return number >= -1 && number <= 1000 ? number : null;
            } catch (NumberFormatException e) {
                return null;
            }
        }

        boolean open() {
            try {
                // never through a link someone else planted in the shared directory
                lockChannel = FileChannel.open(lock, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                        LinkOption.NOFOLLOW_LINKS);
                held = lockChannel.tryLock();
                if (held == null) {
                    lockChannel.close();
                    return false;
                }
                write();
                return true;
            } catch (IOException | RuntimeException e) {
                problem("cannot open its telemetry: " + e);
                closeQuietly();
                return false;
            }
        }

        void sent(String topic) {
            acknowledgements = true;
            enqueued.incrementAndGet();
            if (topic != null) {
                synchronized (this) {
                    if (topics.size() < 10_000) {
                        topics.add(topic);
                    }
                }
            }
        }

        void delivered() {
            acknowledgements = true;
            delivered.incrementAndGet();
            lastDeliveryMs = System.currentTimeMillis();
        }

        void failed(String topic, Exception exception) {
            acknowledgements = true;
            failed.incrementAndGet();
            String code = code(exception);
            String reason = redact(exception.getClass().getSimpleName() + ": " + exception.getMessage());
            long now = System.currentTimeMillis();
            synchronized (this) {
                String key = topic + "\u0000" + code;
                ErrorSeen seen = errors.remove(key);  // re-inserted: most recent last
                if (seen == null) {
                    seen = new ErrorSeen(code, topic, now);
                }
                seen.count++;
                seen.lastMs = now;
                errors.put(key, seen);
                while (errors.size() > MAX_LIST) {
                    Iterator<String> oldest = errors.keySet().iterator();
                    oldest.next();
                    oldest.remove();
                }
                Long count = errorCounts.get(code);
                if (count != null || errorCounts.size() < MAX_LIST) {
                    errorCounts.put(code, count == null ? 1 : count + 1);
                }
                lastCode = code;
                lastReason = reason;
                lastErrorMs = now;
            }
        }

        String redact(String text) {
            String out = text == null ? "" : text;
            for (String secret : secrets) {
                out = out.replace(secret, REDACTED);
            }
            return out;
        }

        void problem(String what) {
            if (!toldProblem) {
                toldProblem = true;
                warn(redact(what), clientId, json.getParent().toString());
            }
        }

        private void readMetrics(long now) {
            double split = value("batch-split-total");
            if (split > splits) {
                if (splitsFirstMs == 0) {
                    splitsFirstMs = now;
                }
                splitsLastMs = now;
                splits = split;
            }
            double throttleMs = value("produce-throttle-time-max");
            if (throttleMs > 0) {
                throttleCount++;
                throttleLastMs = now;
                throttleLastSeconds = throttleMs / 1000.0;
            } else if (throttleCount > 0 && throttleLastSeconds > 0) {
                throttleLastMs = now;  // the broker stopped throttling (librdkafka's 0 report)
                throttleLastSeconds = 0;
            }
        }

        private double value(String name) {
            KafkaMetric metric = metrics.get(name);
            if (metric == null) {
                return 0;
            }
            Object value = metric.metricValue();
            if (!(value instanceof Number)) {
                return 0;
            }
            double d = ((Number) value).doubleValue();
            return Double.isNaN(d) || Double.isInfinite(d) || d < 0 ? 0 : d;
        }

        /**
         * The next document: built under this producer's lock (which the client's threads
         * take only for a few map updates), written under the file lock alone, so a slow
         * disk never holds up a send or an acknowledgement; nothing is written once closed.
         */
        void write() throws IOException {
            byte[] bytes;
            synchronized (this) {
                long now = System.currentTimeMillis();
                readMetrics(now);
                seq++;
                bytes = document(now).getBytes(StandardCharsets.UTF_8);
            }
            synchronized (files) {
                if (!closed) {
                    replace(bytes);
                }
            }
        }

        private void replace(byte[] bytes) throws IOException {
            Files.deleteIfExists(temp);  // a link planted there goes, it is never written through
            try (FileChannel out = FileChannel.open(temp, StandardOpenOption.CREATE_NEW,
                    StandardOpenOption.WRITE, LinkOption.NOFOLLOW_LINKS)) {
                ByteBuffer buffer = ByteBuffer.wrap(bytes);
                while (buffer.hasRemaining()) {
                    out.write(buffer);
                }
            }
            try {
                Files.move(temp, json, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            } catch (AtomicMoveNotSupportedException e) {
                Files.move(temp, json, StandardCopyOption.REPLACE_EXISTING);
            }
        }

        private String document(long now) {
            long sent = enqueued.get();
            long ok = delivered.get();
            long bad = failed.get();
            Json j = new Json();
            j.open();
            j.field("schema", SCHEMA_VERSION).field("kind", KIND).field("seq", seq);
            j.field("ts", now / 1000.0).field("started_ts", startedMs / 1000.0);
            j.field("interval_seconds", INTERVAL_MS / 1000.0).field("state", "running");
            j.field("detail", "full");
            j.key("identity").open();
            j.field("pod", env("HANGWATCH_POD_NAME")).field("namespace", env("HANGWATCH_POD_NAMESPACE"));
            j.field("node", env("HANGWATCH_NODE_NAME"));
            j.field("application_id", env("SPARK_APPLICATION_ID"));
            String executor = env("SPARK_EXECUTOR_ID");
            j.field("executor_id", executor != null ? executor : env("HANGWATCH_EXECUTOR_ID"));
            j.field("hostname", hostname()).field("pid", pid).field("producer", number);
            j.field("client_id", clientId).close();
            j.key("counters").open();
            j.field("enqueued", sent).field("delivered", ok).field("failed", bad);
            j.field("in_queue", Math.max(0, sent - ok - bad)).field("queue_full_waits", 0);
            j.field("unacknowledged", Math.max(0, sent - ok - bad)).close();
            j.field("last_delivery_ts", lastDeliveryMs == 0 ? null : lastDeliveryMs / 1000.0);
            if (lastCode == null) {
                j.field("last_error", (String) null);
            } else {
                j.key("last_error").open().field("code", lastCode).field("reason", lastReason);
                j.field("ts", lastErrorMs / 1000.0).field("fatal", false).close();
            }
            j.key("error_counts").open();
            for (Map.Entry<String, Long> e : errorCounts.entrySet()) {
                j.field(e.getKey(), e.getValue());
            }
            j.close();
            j.key("errors").array();
            List<ErrorSeen> recent = new ArrayList<>(errors.values());
            Collections.reverse(recent);  // the most recently met first
            for (ErrorSeen e : recent) {
                j.open().field("code", e.code).field("topic", e.topic).field("count", e.count);
                j.field("first_ts", e.firstMs / 1000.0).field("last_ts", e.lastMs / 1000.0).close();
            }
            j.end();
            if (throttleCount == 0) {
                j.field("throttle", (String) null);
            } else {
                j.key("throttle").open().field("count", throttleCount);
                j.field("last_ts", throttleLastMs / 1000.0).field("last_seconds", throttleLastSeconds);
                j.field("broker", "").close();
            }
            j.key("bootstrap").array();
            for (int i = 0; i < bootstrap.size() && i < MAX_LIST; i++) {
                j.value(bootstrap.get(i));
            }
            j.end();
            j.key("topics").array();
            int listed = 0;
            for (String topic : topics) {
                if (listed++ == MAX_LIST) {
                    break;
                }
                j.value(topic);
            }
            j.end();
            j.field("topic_count", topics.size());
            if (acks == null) {
                j.field("acks", (String) null);
            } else {
                j.field("acks", acks.longValue());
            }
            j.key("client").open().field("library", LIBRARY).field("version", AppInfoParser.getVersion());
            j.field("reporter", REPORTER_VERSION).field("acknowledgements", acknowledgements).close();
            if (splitsFirstMs != 0) {
                j.key("splits").open().field("count", (long) splits);
                j.field("first_ts", splitsFirstMs / 1000.0).field("last_ts", splitsLastMs / 1000.0).close();
            }
            j.close();
            return j.toString();
        }

        private static String env(String name) {
            String value = System.getenv(name);
            return value == null || value.isEmpty() ? null : value;
        }

        private static String hostname() {
            try {
                return InetAddress.getLocalHost().getHostName();
            } catch (IOException e) {
                return null;
            }
        }

        void close() {
            synchronized (files) {
                closed = true;
                removeFiles();
            }
        }

        private void removeFiles() {
            try {
                Files.deleteIfExists(json);
                Files.deleteIfExists(temp);
                Files.deleteIfExists(lock);
            } catch (IOException e) {
                problem("cannot remove its telemetry: " + e);
            }
            closeQuietly();
        }

        private void closeQuietly() {
            try {
                if (held != null) {
                    held.release();
                }
                if (lockChannel != null) {
                    lockChannel.close();
                }
            } catch (IOException e) {
                // the process's end releases it anyway
            }
        }
    }

    static final class ErrorSeen {
        final String code;
        final String topic;
        final long firstMs;
        long count;
        long lastMs;

        ErrorSeen(String code, String topic, long firstMs) {
            this.code = code;
            this.topic = topic;
            this.firstMs = firstMs;
        }
    }

    /** Compact JSON, strings cut to MAX_STRING characters. */
    static final class Json {
        private final StringBuilder out = new StringBuilder(4096);
        private boolean first = true;

        Json open() {
            comma();
            out.append('{');
            first = true;
            return this;
        }

        Json close() {
            out.append('}');
            first = false;
            return this;
        }

        Json array() {
            comma();
            out.append('[');
            first = true;
            return this;
        }

        Json end() {
            out.append(']');
            first = false;
            return this;
        }

        Json key(String name) {
            comma();
            string(name);
            out.append(':');
            first = true;  // the value follows without a comma
            return this;
        }

        Json field(String name, String value) {
            key(name);
            first = false;
            if (value == null) {
                out.append("null");
            } else {
                string(value);
            }
            return this;
        }

        Json field(String name, long value) {
            key(name);
            first = false;
            out.append(value);
            return this;
        }

        Json field(String name, double value) {
            key(name);
            first = false;
            out.append(Double.isNaN(value) || Double.isInfinite(value) ? "0" : Double.toString(value));
            return this;
        }

        Json field(String name, Double value) {
            if (value == null) {
                return field(name, (String) null);
            }
            return field(name, value.doubleValue());
        }

        Json field(String name, boolean value) {
            key(name);
            first = false;
            out.append(value);
            return this;
        }

        Json value(String value) {
            comma();
            string(value);
            first = false;
            return this;
        }

        private void comma() {
            if (!first) {
                out.append(',');
            }
            first = false;
        }

        private void string(String value) {
            String s = value.length() > MAX_STRING ? value.substring(0, MAX_STRING) : value;
            out.append('"');
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                switch (c) {
                    case '"': out.append("\\\""); break;
                    case '\\': out.append("\\\\"); break;
                    case '\n': out.append("\\n"); break;
                    case '\r': out.append("\\r"); break;
                    case '\t': out.append("\\t"); break;
                    default:
                        if (c >= 0xD800 && c <= 0xDFFF) {
                            out.append('?');  // a cut may split a pair: no lone surrogate
                        } else if (c < 0x20) {
                            out.append(String.format("\\u%04x", (int) c));
                        } else {
                            out.append(c);
                        }
                }
            }
            out.append('"');
        }

        @Override
        public String toString() {
            return out.toString();
        }
    }
}
