"""Known Python call paths for agent_python.sh: nested functions (main ->
outer -> middle -> hot), a thread with its own hot function (worker ->
thread_hot), a generator driven by a C function (consume_gen -> sum ->
gen_values) and a C function calling back into Python (sort_cb ->
sorted -> sort_key). Runs for argv[1] seconds at most, less if the file
named by $PY_STOP_FILE appears; with argv[2] == "exec", then replaces
itself with a shell loop of a second (an exec mid-run)."""
import os
import sys
import threading
import time


def hot(n):
    s = 0
    for i in range(n):
        s += i * i  # HOT_LINE
    return s


def middle():
    return hot(20000)


def outer():
    return middle()


def thread_hot(n):
    s = 0
    for i in range(n):
        s ^= i * 3  # THREAD_LINE
    return s


def worker(stop):
    while not stop.is_set():
        thread_hot(20000)


def gen_values(n):
    for i in range(n):
        yield i * 3  # GEN_LINE


def consume_gen():
    return sum(gen_values(20000))


def sort_key(x):
    return (x * 7919) % 1013  # KEY_LINE


def sort_cb():
    return sorted(range(10000), key=sort_key)


def main(secs):
    stop = threading.Event()
    t = threading.Thread(target=worker, args=(stop,))
    t.start()
    end = time.time() + secs
    stop_file = os.environ.get("PY_STOP_FILE", "")
    while time.time() < end and not (stop_file and os.path.exists(stop_file)):
        outer()
        consume_gen()
        sort_cb()
    stop.set()
    t.join()


if __name__ == "__main__":
    main(float(sys.argv[1]))
    if len(sys.argv) > 2 and sys.argv[2] == "exec":
        os.execv("/bin/sh", ["sh", "-c", "end=$(($(date +%s) + 1)); "
                             "while [ $(date +%s) -lt $end ]; do :; done"])
