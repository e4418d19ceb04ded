#!/usr/bin/env python3
"""Cold symbolization, driver against driver, interleaved with addr2line.

    bench/symbols-interleaved.py ROUNDS BINARY ADDRFILE DRIVER...

Each round runs every DRIVER (a bench_symbols build, or a script that execs
one with extra flags) as `DRIVER -w 0 BINARY ADDRFILE`, in an order that
alternates from round to round, then `addr2line -i -f -e BINARY` on the same
addresses. Prints the best and median cold pass of each in CPU time (the
driver's cold_cpu_s; addr2line's user + system) and in wall time, with their
ratios to addr2line's. For before/after comparisons on a noisy machine: the
rounds see the same moments of the host. ADDRFILE: one hex address per
line, as bench-symbols.sh draws them.
"""
import re
import resource
import statistics
import subprocess
import sys
import time


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    rounds, binary, addrs, drivers = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
    cpu = {d: [] for d in drivers}
    wall = {d: [] for d in drivers}
    a2l_cpu, a2l_wall = [], []
    for r in range(rounds):
        for d in drivers if r % 2 == 0 else drivers[::-1]:
            out = subprocess.run([d, "-w", "0", binary, addrs], capture_output=True,
                                 text=True, check=True).stdout
            n = int(re.search(r"^n=([0-9]+)", out).group(1))
            cpu[d].append(n / float(re.search(r"cold_per_cpu_s=([0-9]+)", out).group(1)))
            wall[d].append(n / float(re.search(r"cold_per_s=([0-9]+)", out).group(1)))
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        with open(addrs) as f:
            subprocess.run(["addr2line", "-i", "-f", "-e", binary], stdin=f,
                           stdout=subprocess.DEVNULL, check=True)
        a2l_wall.append(time.monotonic() - t0)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        a2l_cpu.append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
    med = statistics.median
    print("addr2line   cpu best %.4f median %.4f; wall best %.4f median %.4f" %
          (min(a2l_cpu), med(a2l_cpu), min(a2l_wall), med(a2l_wall)))
    for d in drivers:
        print("%-12s cpu best %.5f median %.5f (%.2fx / %.2fx)  wall best %.5f median %.5f "
              "(%.2fx / %.2fx)" %
              (d.split("/")[-1], min(cpu[d]), med(cpu[d]), min(a2l_cpu) / min(cpu[d]),
               med(a2l_cpu) / med(cpu[d]), min(wall[d]), med(wall[d]),
               min(a2l_wall) / min(wall[d]), med(a2l_wall) / med(wall[d])))


if __name__ == "__main__":
    main()
