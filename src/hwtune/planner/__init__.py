"""`hwtune plan`: predict the best executors x threads, scheduler and
latency of a model on machines of 16 to 256 cores from profiles taken on
this one, and say how far those predictions are off where they can be
measured.

    machine.py    what a machine offers: this host (scan + calibration) or
                  a TOML description (configs/machines/)
    opdata.py     per-op facts of a graph: type, FLOPs, bytes, workload
    costmodel.py  an op's time on t threads of a machine, from its 1-thread
                  time here: compute, memory traffic, fork-join, a serial
                  fraction fitted per op type
    calibrate.py  what the model needs measured on this host beyond the
                  scan: 1-thread op profiles, fork-join and the engine's
                  dispatch overheads (through hwtune.measure)
    search.py     per core count, every scheduler and split simulated by
                  the engine's own schedulers in virtual time
                  (hwtune.native.simulate), per-op thread counts (Liu et
                  al.'s Strategies 1 and 2)
    validate.py   every configuration that fits this host, predicted from
                  the inputs a plan uses (stored scan, stored 1-thread
                  profiles), then measured interleaved
    beside.py     --validate --explain: the machine's figures probed beside
                  the samples, a diagnostic apart from the reported error
    fromcores.py  --validate --from-cores K: the inputs taken on K CPUs into
                  a scratch database, predicted at all of this host's
    intervals.py  a plan's ranges from this host's validation errors per
                  op family
    partcheck.py  each cost-model part against its own micro-benchmark
                  (bench_plan.py parts)
    graphi.py     Graphi's medium models on its 68-core machine, beside the
                  paper's Figure 6 / Table 2 ranges
    store.py      results.db: fitted parameters, validations

(Named planner, not plan: "plan" is the engine's execution plan and the
scan's list of steps.)
"""
