/*
 * The incidents' Java clients' progress lines (compiled with each of them by
 * hangwatch_testing.clients.build): one JSON object per line on stdout,
 * {"ts": <unix seconds>, "event": <event>, <name>: <value>, ...}, flushed at once.
 */
public final class Progress {
    private Progress() {}

    /** Prints one line; `fields` alternate names and values already in JSON. */
    public static synchronized void emit(String event, String... fields) {
        StringBuilder line = new StringBuilder();
        line.append("{\"ts\": ").append(String.format("%.3f", System.currentTimeMillis() / 1000.0));
        line.append(", \"event\": \"").append(event).append('"');
        for (int i = 0; i + 1 < fields.length; i += 2) {
            line.append(", \"").append(fields[i]).append("\": ").append(fields[i + 1]);
        }
        System.out.println(line.append('}'));
        System.out.flush();
    }

    /** `text` as a JSON string on one line. */
    public static String quoted(Object text) {
        String s = String.valueOf(text).replace("\\", "\\\\").replace("\"", "\\\"");
        return '"' + s.replace("\n", " ").replace("\r", " ").replace("\t", " ") + '"';
    }
}
