# unwind_py: a CPU-bound loop in Debian's /usr/bin/python3 (built without
# frame pointers); agent_unwind checks its native stacks reach _start.
import sys, time
def inner(n):
    s = 0
    for i in range(n):
        s += i * i
    return s
def outer():
    end = time.time() + float(sys.argv[1])
    while time.time() < end:
        inner(100000)
outer()
