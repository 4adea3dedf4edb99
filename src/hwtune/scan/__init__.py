"""`hwtune scan`: characterise the machine (peaks, scaling, co-running) into results.db.

steps.py turns options into measurement steps, runner.py executes and stores
them, stats.py holds the pure statistics, summary.py turns stored rows into
the summary every output format (hwtune.report.export) prints.
"""
