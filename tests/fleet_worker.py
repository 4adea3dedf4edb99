"""A fleet worker that dies mid-trial, for test_fleet_storage: it opens the
shared study of a model's first CONV workload as `tune-graph --only conv
--storage URL` names and shapes it, draws one point through hwtune's own
OptunaSearch (its trial RUNNING, its heartbeat beating), prints the study
and the point as one JSON line, and waits (the trial in flight) until the
test kills it.

usage: python fleet_worker.py URL MODEL [NAME=VALUE ...]
"""

import json
import sys


def main(url, model, *sets):
    from hwtune.engine.config import usable_cpu_count
    from hwtune.graph import load_model
    from hwtune.native.isa import selected_isa
    from hwtune.native.threads import allowed_cpus
    from hwtune.tuners import conv_local
    from hwtune.tuners.optuna_search import OptunaSearch
    from hwtune.tuners.search import Space
    from hwtune.tuners.shared_study import study_name

    overrides = {k: int(v) for k, v in (s.split("=", 1) for s in sets)}
    graph = load_model(model, overrides)
    cpus = allowed_cpus()
    # --only conv tunes at the default team: every usable CPU.
    threads = min(usable_cpu_count(cpus), len(cpus))
    isa = selected_isa()
    wl, _ = next(iter(conv_local.workload_groups(graph).values()))
    name = study_name(conv_local.TUNER, wl.key, isa, threads)
    search = OptunaSearch(Space(wl.knobs(isa)), storage=url, study_name=name, max_trials=8)
    params = search.propose()
    print(json.dumps({"study": name, "params": params}), flush=True)
    sys.stdin.read()  # the measurement that never comes back


if __name__ == "__main__":
    main(*sys.argv[1:])
