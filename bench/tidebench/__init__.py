# SPDX-License-Identifier: MIT
"""tidebench: the package behind bench/run.py (`make bench`), standard library only.

Each module imports only modules listed above it:

    runner      running a program under an allocator Variant: environment, the load
                other processes put on the machine meanwhile, retries, failures
    ebizzy      the ebizzy configurations (and madvise counts under strace)
    purge       how each peer purges on every free; bench/purge_floor
    micro       pairs, prodcons, mixed; churn, larson, powers; fastpath under callgrind
    realloc     bench/realloc's growth modes
    idle        bench/idle: RSS after an idle period, re-touch time
    kv          bench/kv: a key-value store's life per phase (RSS, AnonHugePages, fork,
                ops/s, touch latency) and its TLB-bound row
    allocators  the peers installed, extra peers by path, libtide under
                bench/tide-confs: the variants
    cli         the command line
    plan        which parts and variants a run's options select, run in a fixed order
    report      CSV files, the markdown tables of latest.md, ebizzy.png
    targets     the targets of `make bench` and their bounds: data only
    verdicts    each target's verdict from a run's medians
"""
