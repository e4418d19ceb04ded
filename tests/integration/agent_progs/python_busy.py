"""One busy Python process for bench-python and agent_python_first.sh: a CPU loop through a few
named functions (run -> busy_outer -> busy_middle -> busy_leaf), on the
main thread, until killed or argv[1] seconds have passed; with argv[2], a
directory, it makes a file named by its pid there once in its loop. Every Python
frame of a sample of it is on the path <module> -> run -> busy_outer ->
busy_middle -> busy_leaf; bench-python counts the samples whose Python
frames are a prefix of that path from <module>, without a gap."""
import os
import sys
import time


def busy_leaf(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def busy_middle():
    return busy_leaf(3000) + busy_leaf(2000)


def busy_outer():
    return busy_middle()


def run(seconds, ready):
    end = time.monotonic() + seconds
    if ready:
        open(os.path.join(ready, str(os.getpid())), "w").close()
    while time.monotonic() < end:
        busy_outer()


run(float(sys.argv[1]) if len(sys.argv) > 1 else 3600, sys.argv[2] if len(sys.argv) > 2 else "")
