"""The status analytics pipeline (PySpark): readers, analysis, report and the job entry point.

May import: ``status_store.connect`` (Connect's keys and states) and ``status_store.kafka.client_log``; nothing of
the service. Only this package imports pyspark, so ``status_store`` and ``status-store serve`` work without it
(``pip install 'status-store[spark]'`` adds it). Java 17+ is needed by Spark itself.

    records.py   raw records from Kafka (offset ranges read in parallel in the executors) or from files
    latest.py    the status topic's latest statuses: the store's read rules as DataFrame/SQL expressions
    history.py   the history topic's outputs (time in state, episodes, MTTR, flapping, retry outcomes)
    analysis.py  runs both over the two inputs and holds the results
    report.py    the HTML report (and the same in Markdown) from the (small) written outputs
    report_sections.py  its sections, each from the outputs' rows
    report_render.py    its parts (tables, charts, sections) as Markdown and as one HTML page
    charts.py    its charts, SVG drawn here
    session.py   the SparkSession (a local one maps the JVM's class-data archive: class_data.py)
    job.py       the entry point of ``status-store analyze`` and of ``spark-submit .../job.py``
    options.py   its options (argparse only: the CLI shows them without importing pyspark)
    console.py   what the person running it sees: one line per phase, everything else in the log file
    incremental.py  ``--since`` runs that analyse only what is new
    outputs.py   the output directory: a run's staging directory, moved into place only when it finished
"""
