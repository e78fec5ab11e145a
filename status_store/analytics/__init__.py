"""The status analytics pipeline (PySpark): readers, analysis, report and the job entry point.

Only this package imports pyspark, so ``status_store`` and ``status-store serve`` work without it
(``pip install 'status-store[spark]'`` adds it). Java 17+ is needed by Spark itself.

    records.py   raw records from Kafka (offset ranges read in parallel in the executors) or from files
    analysis.py  the store's read rules and the history analytics, as DataFrame/SQL expressions
    report.py    a Markdown report with PNG charts from the (small) aggregated results
    job.py       the entry point of ``status-store analyze`` and of ``spark-submit .../job.py``
"""
