"""The results.db schema, as an ordered list of named migrations.

PRAGMA user_version is the schema version; each applied migration is also
recorded in hwtune_migrations (sqlite-utils' migration style). The C reader
checks application_id and user_version before trusting any table, so a
migration that changes a column a reader uses must bump the version.
Never edit a released migration: append a new one.
"""

import sqlite3
from typing import Callable, List, Tuple

import sqlite_utils

# 'HWTN' as a big-endian int32: the header field `file(1)` and the C reader
# use to tell an hwtune database from any other SQLite file.
APPLICATION_ID = 0x4857544E
MIGRATIONS_TABLE = "hwtune_migrations"
META_TABLE = "hwtune_meta"


def _execute_script(db: sqlite_utils.Database, script: str) -> None:
    """Run statements one by one inside the caller's transaction
    (sqlite3's executescript would COMMIT it first on older sqlite-utils)."""
    statement = ""
    for line in script.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            db.execute(statement)
            statement = ""
    if statement.strip():
        raise ValueError(f"incomplete SQL statement in migration: {statement.strip()[:60]}")


# engine_configs as migrations 4 and 6 rebuild it: they differ only in the
# scheduler column and two comments. SQLite keeps each CREATE's text as the
# schema (sqlite_master), so this text is what those migrations recorded:
# never edit it, add a new migration instead.
_ENGINE_CONFIGS = """
        CREATE TABLE %(table)s (
            id                   INTEGER PRIMARY KEY,
            host_key             TEXT NOT NULL REFERENCES hosts(host_key),
            graph_hash           TEXT NOT NULL REFERENCES graphs(graph_hash),
            executors            INTEGER NOT NULL CHECK (executors >= 1),
            threads_per_executor INTEGER NOT NULL CHECK (threads_per_executor >= 1),
%(scheduler)s
            pin                  INTEGER NOT NULL CHECK (pin IN (0, 1)),
            op_threads_json      TEXT NOT NULL DEFAULT '{}',
            op_params_json       TEXT NOT NULL DEFAULT '{}',
            op_priority_json     TEXT NOT NULL DEFAULT '{}',
            -- %(cost_note)s
            op_cost_json         TEXT NOT NULL DEFAULT '{}',
            -- %(candidates_note)s
            op_candidates_json   TEXT NOT NULL DEFAULT '{}',
            -- the lowered graph after this config's layout rewrites (NULL:
            -- graphs.lowered_json), for the stand-alone C runner
            lowered_json         TEXT,
            source               TEXT NOT NULL CHECK (source IN ('default', 'tuned', 'user')),
            hwtune_version       TEXT NOT NULL,
            created_at           TEXT NOT NULL,
            UNIQUE (host_key, graph_hash, source)
        );
"""
# The columns each version's engine_configs has that the previous one had
# not (v2: all of its columns), copied by the next rebuild.
_V2_COLUMNS = ("id", "host_key", "graph_hash", "executors", "threads_per_executor",
               "scheduler", "pin", "op_threads_json", "op_params_json", "op_priority_json",
               "source", "hwtune_version", "created_at")
_V4_COLUMNS = ("op_cost_json", "op_candidates_json", "lowered_json")


def _rebuild_engine_configs(db: sqlite_utils.Database, table: str, columns: Tuple[str, ...],
                            **ddl: str) -> None:
    """Replace engine_configs by _ENGINE_CONFIGS filled with `ddl`
    (scheduler: the column's lines, cost_note, candidates_note), created as
    `table` and renamed (SQLite cannot alter a CHECK), keeping `columns` of
    every row, its id, and the op_profiles links into it: those links are
    set aside while the old table is dropped and restored once the rebuilt
    one is in place (foreign keys stay on: the migration runs inside a
    transaction, where SQLite cannot turn them off)."""
    names = ", ".join(columns)
    _execute_script(db, _ENGINE_CONFIGS % dict(ddl, table=table) + f"""
        CREATE TEMP TABLE profile_links AS
            SELECT id, config_id FROM op_profiles WHERE config_id IS NOT NULL;
        UPDATE op_profiles SET config_id = NULL WHERE config_id IS NOT NULL;
        INSERT INTO {table} ({names}) SELECT {names} FROM engine_configs;
        DROP TABLE engine_configs;
        ALTER TABLE {table} RENAME TO engine_configs;
        UPDATE op_profiles SET config_id =
            (SELECT config_id FROM profile_links WHERE profile_links.id = op_profiles.id)
            WHERE id IN (SELECT id FROM profile_links);
        DROP TABLE profile_links;
        """)


def _m001_initial(db: sqlite_utils.Database) -> None:
    _execute_script(
        db,
        """
        CREATE TABLE hwtune_meta (
            key   TEXT PRIMARY KEY,
            value TEXT NOT NULL
        );
        CREATE TABLE hosts (
            host_key         TEXT PRIMARY KEY,
            cpu_model        TEXT,
            vendor           TEXT,
            isa_best         TEXT,
            sockets          INTEGER,
            physical_cores   INTEGER,
            logical_cpus     INTEGER,
            numa_nodes       INTEGER,
            fingerprint_json TEXT NOT NULL,
            first_seen       TEXT NOT NULL,
            last_seen        TEXT NOT NULL
        );
        CREATE TABLE runs (
            run_id         INTEGER PRIMARY KEY,
            host_key       TEXT NOT NULL REFERENCES hosts(host_key),
            kind           TEXT NOT NULL,
            hwtune_version TEXT NOT NULL,
            started_at     TEXT NOT NULL,
            finished_at    TEXT,
            status         TEXT NOT NULL DEFAULT 'running'
                CHECK (status IN ('running', 'complete', 'interrupted', 'failed')),
            options_json   TEXT NOT NULL DEFAULT '{}',
            note           TEXT,
            -- who owns a 'running' row: lets a later open mark runs of
            -- killed processes 'interrupted'
            pid            INTEGER,
            hostname       TEXT
        );
        CREATE INDEX runs_host_kind ON runs(host_key, kind, run_id);
        CREATE TABLE measurements (
            id             INTEGER PRIMARY KEY,
            run_id         INTEGER NOT NULL REFERENCES runs(run_id),
            host_key       TEXT NOT NULL REFERENCES hosts(host_key),
            hwtune_version TEXT NOT NULL,
            kernel_variant TEXT NOT NULL,
            bench          TEXT NOT NULL,
            op             TEXT NOT NULL,
            params_json    TEXT NOT NULL DEFAULT '{}',
            threads        INTEGER NOT NULL CHECK (threads >= 1),
            executors      INTEGER NOT NULL DEFAULT 1 CHECK (executors >= 1),
            pinned         INTEGER CHECK (pinned IN (0, 1)),
            n_samples      INTEGER NOT NULL,
            samples_json   TEXT NOT NULL DEFAULT '[]',
            median_s       REAL,
            mad_s          REAL,
            rel_spread     REAL,
            value          REAL,
            unit           TEXT,
            status         TEXT NOT NULL DEFAULT 'ok'
                CHECK (status IN ('ok', 'noisy', 'error', 'skipped')),
            note           TEXT,
            created_at     TEXT NOT NULL
        );
        CREATE INDEX measurements_host_bench ON measurements(host_key, bench);
        CREATE INDEX measurements_run ON measurements(run_id);
        -- Derived results (saturation point, best co-run config, warnings).
        -- A key may be written more than once per run; every row is kept and
        -- readers take the latest.
        CREATE TABLE run_facts (
            id         INTEGER PRIMARY KEY,
            run_id     INTEGER NOT NULL REFERENCES runs(run_id),
            key        TEXT NOT NULL,
            value_json TEXT NOT NULL,
            created_at TEXT NOT NULL
        );
        CREATE INDEX run_facts_run_key ON run_facts(run_id, key);
        """
    )


def _m002_engine(db: sqlite_utils.Database) -> None:
    """Graphs, engine configurations, per-op profiles and run traces.

    Plain columns plus JSON text so the C engine can read a config with
    sqlite3_column_* and a small JSON reader. op_*_json map op names to
    values ({"conv1": 2}); an empty object means no overrides."""
    _execute_script(
        db,
        """
        -- Content-addressed: graph_hash = sha256 of the canonical expanded
        -- model.json, so a config follows the graph, not the file name.
        CREATE TABLE graphs (
            graph_hash    TEXT PRIMARY KEY,
            name          TEXT NOT NULL,
            ops           INTEGER NOT NULL CHECK (ops >= 0),
            expanded_json TEXT NOT NULL,
            created_at    TEXT NOT NULL
        );
        CREATE TABLE engine_configs (
            id                   INTEGER PRIMARY KEY,
            host_key             TEXT NOT NULL REFERENCES hosts(host_key),
            graph_hash           TEXT NOT NULL REFERENCES graphs(graph_hash),
            executors            INTEGER NOT NULL CHECK (executors >= 1),
            threads_per_executor INTEGER NOT NULL CHECK (threads_per_executor >= 1),
            scheduler            TEXT NOT NULL
                CHECK (scheduler IN ('sequential', 'shared-queue', 'critical-path')),
            pin                  INTEGER NOT NULL CHECK (pin IN (0, 1)),
            op_threads_json      TEXT NOT NULL DEFAULT '{}',
            op_params_json       TEXT NOT NULL DEFAULT '{}',
            op_priority_json     TEXT NOT NULL DEFAULT '{}',
            source               TEXT NOT NULL CHECK (source IN ('default', 'tuned', 'user')),
            hwtune_version       TEXT NOT NULL,
            created_at           TEXT NOT NULL,
            UNIQUE (host_key, graph_hash, source)
        );
        -- workload_key = op type + input shapes + attributes (canonical), so
        -- a profile measured in one model serves every model with that op.
        CREATE TABLE op_profiles (
            id           INTEGER PRIMARY KEY,
            host_key     TEXT NOT NULL REFERENCES hosts(host_key),
            workload_key TEXT NOT NULL,
            op_type      TEXT NOT NULL,
            threads      INTEGER NOT NULL CHECK (threads >= 1),
            executors    INTEGER NOT NULL DEFAULT 1 CHECK (executors >= 1),
            median_s     REAL,
            mad_s        REAL,
            n            INTEGER NOT NULL CHECK (n >= 0),
            config_id    INTEGER REFERENCES engine_configs(id),
            created_at   TEXT NOT NULL
        );
        CREATE INDEX op_profiles_lookup ON op_profiles(host_key, workload_key, threads, executors);
        CREATE TABLE run_traces (
            id        INTEGER PRIMARY KEY,
            run_id    INTEGER NOT NULL REFERENCES runs(run_id),
            iteration INTEGER NOT NULL,
            op_name   TEXT NOT NULL,
            op_type   TEXT NOT NULL,
            executor  INTEGER NOT NULL,
            threads   INTEGER NOT NULL,
            start_s   REAL NOT NULL,
            end_s     REAL NOT NULL
        );
        CREATE INDEX run_traces_run ON run_traces(run_id, iteration);
        """
    )


def _m003_lowered(db: sqlite_utils.Database) -> None:
    # The lowered graph (tensors with inferred shapes, ops with C-encoded
    # attributes): shape inference lives in Python, so the stand-alone C
    # runner (engine/standalone/) reads this instead of re-lowering model.json.
    # NULL for graphs stored before v3 until `hwtune run` stores them again.
    db.execute("ALTER TABLE graphs ADD COLUMN lowered_json TEXT")


def _m004_tuning(db: sqlite_utils.Database) -> None:
    """Tuning: every trial of every search (failed ones too, with their
    status), the best result per tuned subject, and engine configs that carry
    what the tuner found (Strategy 3's 'corun' scheduler, per-op costs and
    thread-count candidates, the config's own lowered graph after layout
    rewrites). engine_configs is rebuilt because SQLite cannot alter a CHECK
    (_rebuild_engine_configs)."""
    _execute_script(
        db,
        """
        -- subject: what was tuned. A graph hash (executor sweep, layout DP)
        -- or a workload key (CONV template, per-op threads), so a workload
        -- tuned in one model is found again from any other model.
        -- params_json is canonical JSON: a resumed search finds a finished
        -- trial by equality and never measures it twice.
        CREATE TABLE tuning_trials (
            id             INTEGER PRIMARY KEY,
            run_id         INTEGER REFERENCES runs(run_id),
            host_key       TEXT NOT NULL REFERENCES hosts(host_key),
            tuner          TEXT NOT NULL,
            search         TEXT NOT NULL,
            subject        TEXT NOT NULL,
            isa            TEXT NOT NULL,
            threads        INTEGER NOT NULL CHECK (threads >= 1),
            params_json    TEXT NOT NULL,
            status         TEXT NOT NULL
                CHECK (status IN ('ok', 'error', 'wrong_answer', 'timeout', 'skipped')),
            median_s       REAL,
            mad_s          REAL,
            n              INTEGER NOT NULL DEFAULT 0 CHECK (n >= 0),
            samples_json   TEXT NOT NULL DEFAULT '[]',
            note           TEXT,
            hwtune_version TEXT NOT NULL,
            created_at     TEXT NOT NULL
        );
        CREATE INDEX tuning_trials_subject
            ON tuning_trials(host_key, tuner, subject, isa, threads, params_json);
        CREATE INDEX tuning_trials_run ON tuning_trials(run_id);
        CREATE TABLE tuned_subjects (
            id               INTEGER PRIMARY KEY,
            host_key         TEXT NOT NULL REFERENCES hosts(host_key),
            tuner            TEXT NOT NULL,
            subject          TEXT NOT NULL,
            isa              TEXT NOT NULL,
            threads          INTEGER NOT NULL CHECK (threads >= 1),
            search           TEXT NOT NULL,
            best_params_json TEXT NOT NULL,
            best_s           REAL,
            trials           INTEGER NOT NULL CHECK (trials >= 0),
            run_id           INTEGER REFERENCES runs(run_id),
            hwtune_version   TEXT NOT NULL,
            created_at       TEXT NOT NULL,
            UNIQUE (host_key, tuner, subject, isa, threads)
        );
        """
    )
    _rebuild_engine_configs(
        db, "engine_configs_v4", _V2_COLUMNS,
        scheduler="""            scheduler            TEXT NOT NULL
                CHECK (scheduler IN ('sequential', 'shared-queue', 'critical-path', 'corun')),""",
        cost_note="profiled seconds per op under this config (critical-path levels)",
        candidates_note="Strategy 3: op -> [[threads, seconds], ...], best first")


def _m005_check_baselines(db: sqlite_utils.Database) -> None:
    """`hwtune check` baselines: the raw samples of every figure of a suite
    on a host, kept whole so a later check can run rank tests and bootstrap
    against them (a stored median alone cannot say what is noise). Every
    recorded baseline is kept; the latest per (host, suite) is the one
    compared against, the older ones are history."""
    _execute_script(
        db,
        """
        CREATE TABLE check_baselines (
            id             INTEGER PRIMARY KEY,
            host_key       TEXT NOT NULL REFERENCES hosts(host_key),
            suite          TEXT NOT NULL,
            run_id         INTEGER REFERENCES runs(run_id),
            -- the suite as measured (figures, samples, rounds, thresholds)
            suite_json     TEXT NOT NULL,
            hwtune_version TEXT NOT NULL,
            created_at     TEXT NOT NULL
        );
        CREATE INDEX check_baselines_host_suite ON check_baselines(host_key, suite, id);
        CREATE TABLE check_baseline_figures (
            baseline_id      INTEGER NOT NULL REFERENCES check_baselines(id),
            figure           TEXT NOT NULL,
            kind             TEXT NOT NULL,
            unit             TEXT NOT NULL,
            higher_is_better INTEGER NOT NULL CHECK (higher_is_better IN (0, 1)),
            params_json      TEXT NOT NULL DEFAULT '{}',
            -- raw samples in `unit`, and per sample the median of the
            -- reference-kernel chunk measured right before it (seconds)
            samples_json     TEXT NOT NULL,
            ref_json         TEXT NOT NULL DEFAULT '[]',
            PRIMARY KEY (baseline_id, figure)
        );
        """
    )


def _m006_scheduler_names(db: sqlite_utils.Database) -> None:
    """engine_configs without the CHECK on scheduler names: the engine's
    scheduler table (engine/exec/sched_table.c) is the one list of names,
    and the writer (ResultsDB.put_engine_config) and both readers (Python,
    the C runner) check against it, refusing a name they do not know. The
    table is rebuilt as in v4 (SQLite cannot drop a CHECK), keeping every
    row, its id, and the op_profiles links into it."""
    _rebuild_engine_configs(
        db, "engine_configs_v6", _V2_COLUMNS + _V4_COLUMNS,
        scheduler="""            -- a name of the engine's scheduler table ('critical-path')
            scheduler            TEXT NOT NULL CHECK (scheduler <> ''),""",
        cost_note="profiled seconds per op under this config (level-ordered schedulers)",
        candidates_note="worker-group schedulers: op -> [[threads, seconds], ...], best first")


def _m007_plan(db: sqlite_utils.Database) -> None:
    """`hwtune plan`: the cost model's fitted parameters (a serial fraction
    per op type, with its fit error and what it was fitted to) and the
    validations (every configuration predicted, then measured, on a host).
    Every row is kept; readers take the latest per host (and op type, or
    model and configuration)."""
    _execute_script(
        db,
        """
        CREATE TABLE plan_cost_params (
            id               INTEGER PRIMARY KEY,
            host_key         TEXT NOT NULL REFERENCES hosts(host_key),
            run_id           INTEGER REFERENCES runs(run_id),
            op_type          TEXT NOT NULL,
            -- 'all': scan and op profiles at 2+ threads; 'scan': the scan's
            -- micro-benchmarks only (predictions from 1-thread profiles)
            data             TEXT NOT NULL CHECK (data IN ('all', 'scan')),
            serial_fraction  REAL NOT NULL CHECK (serial_fraction BETWEEN 0 AND 1),
            points           INTEGER NOT NULL CHECK (points >= 0),
            -- |predicted / measured - 1| over the points at the fitted value
            median_rel_err   REAL,
            max_rel_err      REAL,
            source           TEXT NOT NULL,
            hwtune_version   TEXT NOT NULL,
            created_at       TEXT NOT NULL
        );
        CREATE INDEX plan_cost_params_host ON plan_cost_params(host_key, data, op_type, id);
        CREATE TABLE plan_validations (
            id               INTEGER PRIMARY KEY,
            host_key         TEXT NOT NULL REFERENCES hosts(host_key),
            run_id           INTEGER REFERENCES runs(run_id),
            model            TEXT NOT NULL,
            graph_hash       TEXT NOT NULL,
            scheduler        TEXT NOT NULL CHECK (scheduler <> ''),
            executors        INTEGER NOT NULL CHECK (executors >= 1),
            threads          INTEGER NOT NULL CHECK (threads >= 1),
            predicted_s      REAL,
            measured_s       REAL,
            mad_s            REAL,
            samples_json     TEXT NOT NULL DEFAULT '[]',
            -- (predicted - measured) / measured
            rel_error        REAL,
            status           TEXT NOT NULL
                CHECK (status IN ('ok', 'error', 'wrong_answer', 'timeout', 'skipped')),
            note             TEXT,
            isa              TEXT NOT NULL,
            hwtune_version   TEXT NOT NULL,
            created_at       TEXT NOT NULL
        );
        CREATE INDEX plan_validations_host ON plan_validations(host_key, model, id);
        """
    )


def _m008_dynamic(db: sqlite_utils.Database) -> None:
    """Dynamic models (a vertex function over per-sample input graphs):
    every measured (policy, batch, executors x threads, chunk) of `hwtune
    run MODEL --inputs FILE` as one row, and the configs `hwtune tune-graph
    MODEL --inputs FILE` chose. A dynamic model has no graphs row (its F is
    not a graph run on its own): model_hash is the sha256 of F's expanded
    document plus the vertex roles (hwtune.dynamic.model.model_hash), and
    samples_digest the sha256 of the input file's bytes, so runs over the
    same model and the same samples line up whatever the files were called."""
    _execute_script(
        db,
        """
        CREATE TABLE dynamic_runs (
            id             INTEGER PRIMARY KEY,
            run_id         INTEGER NOT NULL REFERENCES runs(run_id),
            host_key       TEXT NOT NULL REFERENCES hosts(host_key),
            model          TEXT NOT NULL,
            model_hash     TEXT NOT NULL,
            inputs         TEXT NOT NULL,
            samples_digest TEXT NOT NULL,
            n_samples      INTEGER NOT NULL CHECK (n_samples >= 1),
            n_vertices     INTEGER NOT NULL CHECK (n_vertices >= 0),
            policy         TEXT NOT NULL CHECK (policy <> ''),
            batch          INTEGER NOT NULL CHECK (batch >= 1),
            executors      INTEGER NOT NULL CHECK (executors >= 1),
            threads        INTEGER NOT NULL CHECK (threads >= 1),
            chunk          INTEGER NOT NULL CHECK (chunk >= 1),
            pinned         INTEGER NOT NULL CHECK (pinned IN (0, 1)),
            -- where the config came from: default, tuned, user, +flags
            config_source  TEXT NOT NULL,
            -- per-op thread counts run: op -> {rows: threads} ({}: the default)
            op_threads_json TEXT NOT NULL DEFAULT '{}',
            -- seconds of each timed pass over the whole sample set
            seconds_json   TEXT NOT NULL DEFAULT '[]',
            median_s       REAL,
            mad_s          REAL,
            samples_per_s  REAL,
            groups         INTEGER NOT NULL DEFAULT 0 CHECK (groups >= 0),
            rows           INTEGER NOT NULL DEFAULT 0 CHECK (rows >= 0),
            -- --check: 'ok' or 'wrong_answer' against the numpy reference
            -- (check_rel: max |engine - numpy| / max |numpy|); NULL: not checked
            check_status   TEXT CHECK (check_status IN ('ok', 'wrong_answer')),
            check_rel      REAL,
            kernel_variant TEXT NOT NULL,
            hwtune_version TEXT NOT NULL,
            created_at     TEXT NOT NULL
        );
        CREATE INDEX dynamic_runs_host_model ON dynamic_runs(host_key, model_hash, id);
        CREATE INDEX dynamic_runs_run ON dynamic_runs(run_id);
        -- The executor's config for a model on a host at one (policy, batch):
        -- what tune-graph chose ('tuned'), used by `hwtune run --inputs`.
        CREATE TABLE dynamic_configs (
            id              INTEGER PRIMARY KEY,
            host_key        TEXT NOT NULL REFERENCES hosts(host_key),
            model           TEXT NOT NULL,
            model_hash      TEXT NOT NULL,
            policy          TEXT NOT NULL CHECK (policy <> ''),
            batch           INTEGER NOT NULL CHECK (batch >= 1),
            executors       INTEGER NOT NULL CHECK (executors >= 1),
            threads         INTEGER NOT NULL CHECK (threads >= 1),
            chunk           INTEGER NOT NULL CHECK (chunk >= 1),
            pin             INTEGER NOT NULL CHECK (pin IN (0, 1)),
            op_threads_json TEXT NOT NULL DEFAULT '{}',
            -- the samples it was tuned on
            samples_digest  TEXT NOT NULL,
            source          TEXT NOT NULL CHECK (source IN ('tuned', 'user')),
            run_id          INTEGER REFERENCES runs(run_id),
            hwtune_version  TEXT NOT NULL,
            created_at      TEXT NOT NULL,
            UNIQUE (host_key, model_hash, policy, batch, source)
        );
        """
    )


def _m009_precision(db: sqlite_utils.Database) -> None:
    # Per-op precision chosen by tune-graph --precision (issue #43): op name
    # -> {"precision": "int8" | "bf16", and for int8 the activation's
    # calibrated "a_scale" and "a_zero"}; {} runs every op in fp32. The C
    # runner reads the config's lowered graph, which carries the rewrite.
    db.execute("ALTER TABLE engine_configs ADD COLUMN op_precision_json TEXT NOT NULL "
               "DEFAULT '{}'")


Migration = Tuple[int, str, Callable[[sqlite_utils.Database], None]]

MIGRATIONS: List[Migration] = [
    (1, "initial schema: hosts, runs, measurements, run_facts", _m001_initial),
    (2, "engine: graphs, engine_configs, op_profiles, run_traces", _m002_engine),
    (3, "graphs.lowered_json for the stand-alone C runner", _m003_lowered),
    (4, "tuning: tuning_trials, tuned_subjects; engine_configs with corun, op costs, "
        "candidates and lowered graph", _m004_tuning),
    (5, "check: check_baselines, check_baseline_figures (raw samples per figure)",
     _m005_check_baselines),
    (6, "engine_configs without the CHECK on scheduler names (the engine's table lists them)",
     _m006_scheduler_names),
    (7, "plan: plan_cost_params (fitted cost model), plan_validations (predicted vs measured)",
     _m007_plan),
    (8, "dynamic: dynamic_runs (every measured policy x batch x config), dynamic_configs "
        "(tuned executor configs)", _m008_dynamic),
    (9, "engine_configs.op_precision_json (tune-graph --precision: int8 / bf16 per op)",
     _m009_precision),
]

LATEST_VERSION = MIGRATIONS[-1][0]


def pending(current: int) -> List[Migration]:
    return [m for m in MIGRATIONS if m[0] > current]


def apply(db: sqlite_utils.Database, current: int, *, now: str, hwtune_version: str) -> List[str]:
    """Apply every migration above `current` inside the caller's write
    transaction; returns the names applied. Stamps the hwtune marker on a new
    database in the same transaction, so no reader ever sees a half-made file."""
    applied = []
    db.execute(
        f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} ("
        "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL, "
        "hwtune_version TEXT NOT NULL)"
    )
    for version, name, fn in pending(current):
        fn(db)
        db.execute(
            f"INSERT INTO {MIGRATIONS_TABLE} (version, name, applied_at, hwtune_version) "
            "VALUES (?, ?, ?, ?)",
            [version, name, now, hwtune_version],
        )
        db.execute(f"PRAGMA user_version = {int(version)}")
        applied.append(name)
    if current == 0:
        db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        db.execute(
            f"INSERT OR REPLACE INTO {META_TABLE} (key, value) VALUES "
            "('application', 'hwtune'), ('created_by', ?), ('created_at', ?)",
            [hwtune_version, now],
        )
    return applied
