/*
 * The incidents' Java clients' sending rate (compiled with each of them by
 * hangwatch_testing.clients.build): ticks `rate` times a second from its creation, on the
 * monotonic clock; a tick already past returns at once, so a slow send is caught up.
 */
public final class Pace {
    private final long periodNanos;
    private long next = System.nanoTime();

    public Pace(double rate) {
        periodNanos = (long) (1e9 / rate);
    }

    /** Sleeps until the next tick. */
    public void await() throws InterruptedException {
        next += periodNanos;
        long sleep = next - System.nanoTime();
        if (sleep > 0) {
            Thread.sleep(sleep / 1_000_000, (int) (sleep % 1_000_000));
        }
    }
}
