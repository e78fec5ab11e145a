"""What must survive: the spool (accepted writes on local disk across crashes) and its replay at start, the
append-only event topics (status history, dead letters), and what becomes of an update after its last retry.

    spool.py         the spool: every status update not yet settled, on local disk
    spool_db.py      its SQLite database: checked whole, upgraded from older formats, written in transactions
    spool_file.py    its file as the operating system sees it: a usable path, one process at a time
    spool_health.py  whether it takes writes, since when and why not
    spool_tally.py   what it accepted, kept beside its file, so that a start notices what it lost
    replay.py        the replay at start: what an earlier run accepted and did not see written
    history.py       the status history and dead-letter topics
    after_retry.py   what becomes of an update after its last retry, and of a store whose writes keep failing

May import: ``status_store.config``, ``status_store.kafka``, ``status_store.retry``, ``status_store.connect``,
``status_store.errors``. Never the store, the fleet's read side or the HTTP API.
"""
