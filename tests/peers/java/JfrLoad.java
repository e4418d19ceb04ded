// JfrLoad: a Java program with known hot methods, allocations and monitor
// contention, recorded with the JDK's own flight recorder for the
// Pyroscope format=jfr tests (tests/integration/pyroscope_jfr.sh).
//
//   java -XX:StartFlightRecording=filename=F,settings=profile JfrLoad MILLIS
public class JfrLoad {
    static final Object LOCK = new Object();
    static volatile Object sink;

    static long spinAlpha(long n) {
        long s = 0;
        for (long i = 0; i < n; i++) s += i * i % 7;
        return s;
    }

    static long spinBeta(long n) {
        long s = 0;
        for (long i = 0; i < n; i++) s ^= i * 31 + (s >>> 3);
        return s;
    }

    static void allocate() {
        for (int i = 0; i < 2000; i++) sink = new byte[4096];
    }

    // Holds the monitor 30 ms at a time, so the other thread waits on it.
    static void contend() throws InterruptedException {
        synchronized (LOCK) {
            Thread.sleep(30);
        }
    }

    public static void main(String[] args) throws Exception {
        long end = System.currentTimeMillis() + Long.parseLong(args[0]);
        Runnable locker = () -> {
            try {
                while (System.currentTimeMillis() < end) contend();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        };
        Thread t1 = new Thread(locker, "locker-1"), t2 = new Thread(locker, "locker-2");
        t1.start();
        t2.start();
        long x = 0;
        while (System.currentTimeMillis() < end) {
            x += spinAlpha(2_000_000);
            x += spinBeta(1_000_000);
            allocate();
        }
        t1.join();
        t2.join();
        System.out.println(x);
    }
}
