"""`hwtune scan`: characterise the machine (peaks, scaling, co-running) into results.db.

plan.py turns options into measurement steps, runner.py executes and stores
them, stats.py holds the pure statistics, report.py turns stored rows into
the summary both renderers (tables and JSON) print.
"""
