"""The analytics job: read the inputs, analyze, write Parquet outputs and the report.

Runs as ``status-store analyze ...`` (an embedded ``local[*]`` Spark unless a master is configured)
and unchanged as ``spark-submit status_store/analytics/job.py ...`` on a cluster, where spark-submit
gives the master, memory and every other setting.

It fails loudly: input that cannot be read as asked (brokers that do not answer within ``--timeout``, a
missing topic, a partition or range not read in time, a missing or unreadable file) ends the run with
one line saying why and exit code 1, and writes nothing (outputs are staged, then moved into place; see
``outputs.py``). An empty topic is a warning. Bad options and a missing Java exit with 2. Garbled
records are data, not failures: they are counted.

With ``--since`` a run reads only the records after the previous run's checkpoint and analyses them
together with the raw records the previous runs kept, so its outputs equal one run over everything.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark import SparkContext, StorageLevel
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

# Absolute imports: spark-submit runs this file as a script (the package must be importable: installed,
# or shipped with --py-files).
from status_store.analytics.analysis import Analysis, analyze, retained
from status_store.analytics.console import Progress, default_log_file, first_line, logging_to, summary_text
from status_store.analytics.history import parse_history_records
from status_store.analytics.incremental import (
    HISTORY_COUNTERS,
    OUTCOME_SCHEMA,
    TAIL_SCHEMA,
    Carried,
    continuation,
    continue_analysis,
    outcome_events,
    tails,
)
from status_store.analytics.latest import DAY_MS, utc_date
from status_store.analytics.options import add_arguments, parse_settings
from status_store.analytics.outputs import (
    CHECKPOINT,
    STATE_DIR,
    Checkpoint,
    OutputDir,
    is_local,
    read_local_text,
)
from status_store.analytics.records import (
    RAW_SCHEMA,
    KafkaFrames,
    Plan,
    ReadProblem,
    missing_files,
    plan_topics,
    read_files,
)
from status_store.analytics.report import write_report
from status_store.analytics.session import JavaMissingError, check_java, finish, get_session, master_of

log = logging.getLogger(__name__)

#: Where the report goes when ``--out`` is not a local directory.
LOCAL_REPORT = Path("status-store-report")
#: Shuffle partitions, when nothing sets them: one per this many input records, at least one per core.
RECORDS_PER_SHUFFLE_PARTITION = 250_000
#: A run of at most this many records is short: its local Spark starts with ``session.QUICK_START_JAVA_OPTIONS``
#: (measured at 1,000 records; kept below the 200k benchmark size, where it was not measured apart).
QUICK_RUN_RECORDS = 100_000
#: Bytes of an exported record, about (to size a run over files).
BYTES_PER_RECORD = 100


class RunFailed(Exception):
    """The input could not be read as asked; the run wrote nothing."""


@dataclass
class Inputs:
    """What the analysis reads, and what the run keeps for the next one."""

    status: DataFrame
    history: DataFrame
    warnings: list[ReadProblem] = field(default_factory=list)
    kafka_ranges: dict[str, int] = field(default_factory=dict)
    next_offsets: dict[str, dict[int, int]] = field(default_factory=dict)
    #: The Kafka reads, whose problems are known once an action has read them.
    kafka: KafkaFrames | None = None
    #: The records earlier ``--since`` runs kept (cut again to the retention window by this run).
    kept: DataFrame | None = None
    #: The records this ``--since`` run read from Kafka (new: after the checkpoint), as kept for the next run.
    read: DataFrame | None = None


def run(args: argparse.Namespace, spark: SparkSession | None = None, progress: Progress | None = None,
        log_file: Path | None = None) -> dict[str, Any]:
    """Run the job for parsed options; returns the summary (also ``<out>/summary.json``).

    Bad input fails before Spark starts, in seconds: the options, a local ``--since`` checkpoint, missing local
    files, and the Kafka plan (unreachable brokers within ``--timeout``, a missing topic).
    """
    if (args.files is None) == (args.bootstrap_servers is None):
        raise ValueError("give either --bootstrap-servers (read the topics from Kafka) or --files, not both")
    progress = progress or Progress()
    conf = parse_settings(args.conf, "--conf")
    consumer = ({"bootstrap.servers": args.bootstrap_servers, **parse_settings(args.kafka, "--kafka")}
                if args.bootstrap_servers is not None else {})
    # A --since elsewhere than on the local disk is read through Spark: then the plan waits for Spark too.
    early = args.since is None or is_local(args.since)
    previous = _checkpoint(read_local_text, args, progress) if args.since is not None and early else None
    master = master_of(conf)
    if spark is None and master.startswith("local") and SparkSession.getActiveSession() is None:
        check_java()  # the first thing a run needs
    spark_log = f"; its log: {log_file}" if log_file else ""
    plans = None
    records = None  # to analyse, when known before Spark starts
    if consumer and early:
        progress.phase(f"starting Spark ({master}) once the input is planned{spark_log}")
        plans = _plan(args, consumer, previous, progress)
        planned = sum(plan.records for plan in plans)
        # A run that can continue from the tails analyses about what it reads, not what earlier runs kept.
        records = planned if previous is not None and previous.tails is not None else _records(planned, previous)
    elif args.files is not None:
        _fail_on(missing_files(args.files))
        records = _records(_file_records(args.files), previous) if early else None
    if plans is None:
        progress.phase(f"starting Spark ({master}){spark_log}")
    spark = spark or get_session(conf, jvm_log=log_file, class_data=True,
                                 quick_start=records is not None and records <= QUICK_RUN_RECORDS)
    out = OutputDir(spark, args.out)
    for line in out.recover():
        progress.warning(line)
    try:
        if args.since is not None and not early:
            previous = _checkpoint(out.read_text, args, progress)
        if consumer:
            inputs = _kafka_inputs(spark, out, args, consumer, plans or _plan(args, consumer, previous, progress),
                                   previous, progress)
        else:
            inputs = _file_inputs(spark, out, args, previous, progress)
        summary = _analyze_and_write(spark, out, args, inputs, previous, progress)
        progress.phase("done")
        return summary
    except BaseException:
        out.discard()
        raise


def _checkpoint(read_text: Callable[[str], str | None], args: argparse.Namespace,
                progress: Progress) -> Checkpoint | None:
    """The checkpoint of the earlier run at ``--since``; None (everything is read) when there is none yet."""
    since = args.since.rstrip("/")
    path = f"{since}/{CHECKPOINT}"
    text = read_text(path)
    if text is None:
        progress.warning(f"no checkpoint in {since} yet: reading everything (the next run starts where this "
                         "one ends)")
        return None
    try:
        checkpoint = Checkpoint.from_json(text, since)
    except ValueError as e:
        raise ValueError(f"--since {since}: {path} is not a checkpoint written by status-store analyze: {e}") from None
    if (checkpoint.status_topic, checkpoint.history_topic) != (args.status_topic, args.history_topic):
        raise ValueError(f"--since {since}: its checkpoint is of the topics {checkpoint.status_topic}, "
                         f"{checkpoint.history_topic}; this run reads {args.status_topic}, {args.history_topic}")
    return checkpoint


def _topics(args: argparse.Namespace) -> list[str]:
    return [args.status_topic, *([args.history_topic] if args.history_topic else [])]


def _plan(args: argparse.Namespace, consumer: dict[str, Any], previous: Checkpoint | None,
          progress: Progress) -> list[Plan]:
    """Plan every topic with one consumer (bounded by ``--timeout``); any problem fails the run."""
    progress.phase(f"planning: {', '.join(_topics(args))} at {args.bootstrap_servers} (timeout {args.timeout:g} s)")
    plans = plan_topics(consumer, _topics(args), args.max_records_per_range, args.timeout,
                        previous.offsets if previous is not None else None)
    _fail_on([problem for plan in plans for problem in plan.problems])
    return plans


def _kafka_inputs(spark: SparkSession, out: OutputDir, args: argparse.Namespace, consumer: dict[str, Any],
                  plans: list[Plan], previous: Checkpoint | None, progress: Progress) -> Inputs:
    """The planned ranges of both topics, read by one Spark job (the analysis's first, or the one keeping the
    records for the next ``--since`` run)."""
    ranges = [r for plan in plans for r in plan.ranges]
    progress.phase(f"reading {len(ranges)} ranges, up to {sum(p.records for p in plans):,} records"
                   + (" after the checkpoint" if previous is not None else ""))
    _size_shuffle(spark, _records(sum(p.records for p in plans), previous))
    kafka = KafkaFrames(spark, consumer, args.range_timeout, args.max_records_per_range)
    frames = [kafka.frame(plan.ranges) for plan in plans]
    warnings = [warning for plan in plans for warning in plan.warnings]
    warnings += [ReadProblem(plan.topic, "empty: no records") for plan in plans
                 if not plan.ranges and not (previous is not None and previous.offsets.get(plan.topic))]
    next_offsets = {plan.topic: {**(previous.offsets.get(plan.topic, {}) if previous is not None else {}),
                                 **plan.next_offsets} for plan in plans}
    counts = {plan.topic: len(plan.ranges) for plan in plans}
    if args.since is None:
        status, history = frames[0], frames[1] if len(frames) > 1 else frames[0].limit(0)
        return Inputs(status, history, warnings, counts, next_offsets, kafka)
    read = _keep(spark, out, _union(frames))
    _fail_on(kafka.problems())
    kept = _kept(spark, previous)
    status, history = _by_topic(args, _union([kept, read]))
    return Inputs(status, history, warnings, counts, next_offsets, kept=kept, read=read)


def _file_inputs(spark: SparkSession, out: OutputDir, args: argparse.Namespace, previous: Checkpoint | None,
                 progress: Progress) -> Inputs:
    """The exported records of the two topics (each once, with what earlier runs kept); a missing file fails
    the run, records of other topics are a warning."""
    progress.phase(f"reading {len(args.files)} file path(s)")
    records = read_files(spark, args.files)
    _fail_on(records.problems)
    _size_shuffle(spark, _records(_file_records(args.files), previous))
    topics = _topics(args)
    read = records.frame.filter(F.col("topic").isin(topics))
    warnings = []
    others = records.frame.filter(~F.col("topic").isin(topics) | F.col("topic").isNull()).count()
    if others:
        warnings.append(ReadProblem("files", f"{others} record(s) of other topics than {', '.join(topics)} ignored"))
    if args.since is not None:
        read = _keep(spark, out, read)
    kept = _kept(spark, previous)
    combined = _union([kept, read])
    if previous is not None:
        # Files exported again overlap what earlier runs kept: each record once.
        combined = combined.dropDuplicates(["topic", "partition", "offset"])
    status, history = _by_topic(args, combined)
    return Inputs(status, history, warnings, next_offsets=previous.offsets if previous is not None else {},
                  kept=kept)


def _keep(spark: SparkSession, out: OutputDir, read: DataFrame) -> DataFrame:
    """Write the records this run read for the next ``--since`` run (staged with the outputs; by topic, so that a
    run reads one topic's without the other's), and read them back from there: the input is read once."""
    path = out.staged(_batch(out))
    read.write.partitionBy("topic").parquet(path)
    return spark.read.schema(RAW_SCHEMA).parquet(path)


def _records(read: int, previous: Checkpoint | None) -> int:
    """The records a run analyses: those it reads, and those earlier ``--since`` runs kept."""
    return read + (previous.records if previous is not None else 0)


def _size_shuffle(spark: SparkSession, records: int) -> None:
    """Shuffle partitions sized to the records and the cores, unless ``--conf`` or spark-submit set them (Spark's
    default of 200 makes small runs slow, and one partition per core makes large ones spill)."""
    if spark.sparkContext.getConf().contains("spark.sql.shuffle.partitions"):
        return
    cores = spark.sparkContext.defaultParallelism
    partitions = max(cores, -(-records // RECORDS_PER_SHUFFLE_PARTITION))
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    log.info("spark.sql.shuffle.partitions=%d (%d records, %d cores)", partitions, records, cores)


def _file_records(paths: list[str]) -> int:
    """About how many records local files hold (by their size); remote ones count as none."""
    size = 0
    for path in paths:
        local = Path(path)
        if is_local(path) and local.exists():
            size += sum(f.stat().st_size for f in local.rglob("*") if f.is_file()) if local.is_dir() else (
                local.stat().st_size)
    return size // BYTES_PER_RECORD


def _fail_on(problems: list[ReadProblem]) -> None:
    """Fail the run on the first problem (all of them go to the log)."""
    for problem in problems:
        log.error("input problem: %s", problem)
    if problems:
        more = f" (and {len(problems) - 1} more in the log)" if len(problems) > 1 else ""
        raise RunFailed(f"{problems[0]}{more}")


def _kept(spark: SparkSession, previous: Checkpoint | None) -> DataFrame:
    """The raw records earlier incremental runs read (each batch apart: by topic, or, written by earlier versions,
    with the topic in each row)."""
    if previous is None or not previous.batches:
        return spark.createDataFrame([], RAW_SCHEMA)
    return _union([spark.read.schema(RAW_SCHEMA).parquet(batch) for batch in previous.batches])


def _union(frames: list[DataFrame]) -> DataFrame:
    combined = frames[0]
    for frame in frames[1:]:
        combined = combined.unionByName(frame)
    return combined


def _by_topic(args: argparse.Namespace, records: DataFrame) -> tuple[DataFrame, DataFrame]:
    status = records.filter(F.col("topic") == args.status_topic)
    history = records.filter(F.col("topic") == args.history_topic) if args.history_topic else records.limit(0)
    return status, history


def _analyze_and_write(spark: SparkSession, out: OutputDir, args: argparse.Namespace, inputs: Inputs,
                       previous: Checkpoint | None, progress: Progress) -> dict[str, Any]:
    for warning in inputs.warnings:
        progress.warning(str(warning))
    continuing = _continuing(spark, out, args, inputs, previous)
    if continuing is not None:
        progress.phase("analysing the new records from where the last run left each connector and task")
        carried, new_history = continuing
        analysis = continue_analysis(spark, inputs.status, new_history, carried,
                                     flap_transitions=args.flap_transitions, flap_window_ms=args.flap_window_ms,
                                     from_ms=previous.from_ms if previous is not None else None)
    else:
        progress.phase("analysing")
        # Its first action reads every input record once (Kafka, unless kept records were written first).
        analysis = analyze(inputs.status, inputs.history, as_of_ms=args.as_of, flap_transitions=args.flap_transitions,
                           flap_window_ms=args.flap_window_ms, keep_events=args.since is not None,
                           from_ms=previous.from_ms if previous is not None else None)
    try:
        if inputs.kafka is not None:
            _fail_on(inputs.kafka.problems())
        counters = analysis.counters()
        progress.phase(f"writing {args.out} ({counters['status_records']:,} status and "
                       f"{counters['history_records']:,} history records analysed)")
        return _write(spark, out, args, analysis, inputs, previous, continuing is not None)
    finally:
        analysis.unpersist()


def _continuing(spark: SparkSession, out: OutputDir, args: argparse.Namespace, inputs: Inputs,
                previous: Checkpoint | None) -> tuple[Carried, DataFrame] | None:
    """What this ``--since`` run continues from, and the new history events parsed (kept), when it can continue
    (``incremental``): a checkpoint with tails, the same flapping settings and retention start, the default as-of,
    new records from Kafka and no late event among them; None when it analyses everything kept."""
    if (args.since is None or previous is None or previous.tails is None or previous.as_of_ms is None
            or inputs.read is None or args.as_of is not None
            or previous.flapping != (args.flap_transitions, args.flap_window_ms)
            # Outputs of a run that did not read restarts yet: none to continue from.
            or not out.exists(f"{out.out}/restarts")):
        return None
    _, new_records = _by_topic(args, inputs.read)
    history = parse_history_records(new_records).drop("timestamp").persist(StorageLevel.MEMORY_AND_DISK)
    tails_frame = spark.read.schema(TAIL_SCHEMA).parquet(previous.tails)
    newest, late = continuation(tails_frame, history)
    as_of_ms = max(previous.as_of_ms, newest if newest is not None else previous.as_of_ms)
    if late or _retention_start(as_of_ms, args) != previous.from_ms:
        # A late event, or the retention window moves (the kept records are cut again): analyse everything kept.
        log.info("not continuing from the tails: %d late event(s); retention start %s, was %s", late,
                 _retention_start(as_of_ms, args), previous.from_ms)
        history.unpersist()
        return None
    outcomes = (_union([spark.read.schema(OUTCOME_SCHEMA).parquet(path) for path in previous.outcomes])
                if previous.outcomes else spark.createDataFrame([], OUTCOME_SCHEMA))
    return Carried(previous.as_of_ms, previous.counters, tails_frame, outcomes, out.out), history


def _retention_start(as_of_ms: int | None, args: argparse.Namespace) -> int | None:
    """The UTC midnight ``--retention-days`` before the as-of day."""
    return None if as_of_ms is None else (as_of_ms // DAY_MS - args.retention_days) * DAY_MS


def _write(spark: SparkSession, out: OutputDir, args: argparse.Namespace, analysis: Analysis, inputs: Inputs,
           previous: Checkpoint | None, continued: bool) -> dict[str, Any]:
    """Stage every output, the state for the next run, the report and the summary, then commit them."""
    analysis.write_outputs(out.staging)
    items = out.partition_items(analysis.outputs())
    notes: dict[str, Any] = {"out": args.out, "spark_master": spark.sparkContext.master,
                             "warnings": [str(warning) for warning in inputs.warnings]}
    if inputs.kafka_ranges:
        notes["kafka_ranges"] = inputs.kafka_ranges
    if args.since is not None:
        checkpoint = _next_checkpoint(out, args, analysis, inputs, previous, continued)
        items += [path[len(out.staging) + 1:] for path in checkpoint.paths() if path.startswith(out.staging)]
        checkpoint = checkpoint.moved(out.staging, out.out)
        out.write_text(out.staged(CHECKPOINT), checkpoint.to_json(out.out))
        items.append(CHECKPOINT)
        notes["checkpoint"] = f"{out.out}/{CHECKPOINT}"
        notes["continued"] = continued
    summary = analysis.summary(notes)
    if not args.no_report:
        local = "://" not in args.out
        directory = Path(out.staged("report")) if local else LOCAL_REPORT
        # A continuing run staged the days its new records touched: the report reads the other days as committed.
        committed = out.out if continued else None
        report = write_report(analysis, out.staging, directory, inputs.warnings, committed=committed,
                              from_ms=previous.from_ms if previous is not None else None)
        summary["report"] = str(Path(args.out) / "report" / report.name) if local else str(report)
        if local:
            items.append("report")
    out.write_text(out.staged("summary.json"), json.dumps(summary, indent=2, sort_keys=True) + "\n")
    out.commit([*items, "summary.json"])
    if args.since is not None:
        _forget(out, previous, checkpoint)
    return summary


def _next_checkpoint(out: OutputDir, args: argparse.Namespace, analysis: Analysis, inputs: Inputs,
                     previous: Checkpoint | None, continued: bool) -> Checkpoint:
    """Where the next ``--since`` run starts, and what it analyses again or continues from, staged: the records this
    run read, and those of earlier runs cut to the retention window (``--retention-days`` before the as-of day);
    the tails and the outcome events."""
    counters = analysis.counters()
    batches = [out.staged(_batch(out))]
    cut = _retention_start(analysis.as_of_ms, args)
    if previous is not None and previous.batches:
        if cut is None or inputs.kept is None or continued:
            batches[:0] = previous.batches  # a continuing run has the retention start of the run before
        else:
            status, history = _by_topic(args, inputs.kept)
            kept = out.staged(f"{_batch(out)}-kept")
            retained(status, history, analysis.latest, cut, args.flap_window_ms).write.partitionBy("topic").parquet(
                kept)
            batches.insert(0, kept)
    checkpoint = Checkpoint(args.status_topic, args.history_topic, inputs.next_offsets, batches,
                            counters["status_records"] + counters["history_records"], cut)
    if analysis.as_of_ms is None or analysis.timeline is None or analysis.history is None:
        return checkpoint  # no history: nothing to continue from
    checkpoint.as_of_ms, checkpoint.flapping = analysis.as_of_ms, (args.flap_transitions, args.flap_window_ms)
    checkpoint.counters = {name: counters[name] for name in HISTORY_COUNTERS}
    checkpoint.tails = out.staged(f"{STATE_DIR}/tails/{out.run_id}")
    tails(analysis.timeline, args.flap_window_ms).write.parquet(checkpoint.tails)
    outcomes = outcome_events(analysis.history, analysis.as_of_ms)
    if cut is not None:
        outcomes = outcomes.filter(F.col("date") >= utc_date(F.lit(cut).cast("long")))
    checkpoint.outcomes = [*(previous.outcomes if continued and previous is not None else []),
                           out.staged(f"{STATE_DIR}/outcomes/{out.run_id}")]
    outcomes.write.parquet(checkpoint.outcomes[-1])
    return checkpoint


def _forget(out: OutputDir, previous: Checkpoint | None, checkpoint: Checkpoint) -> None:
    """Remove the state of earlier runs that the new checkpoint no longer names (after its commit: a run that fails
    keeps it)."""
    for path in previous.paths() if previous is not None else []:
        if path not in checkpoint.paths() and path.startswith(f"{out.out}/{STATE_DIR}/"):
            out.remove(path)


def _batch(out: OutputDir) -> str:
    """Where this run keeps the records it read, under ``--out``."""
    return f"{STATE_DIR}/records/{out.run_id}"


def execute(args: argparse.Namespace) -> int:
    """Run the job for parsed options and print the summary. Exit codes: 0 done (perhaps with warnings),
    1 the run failed (nothing written), 2 bad options or no Java."""
    log_file = Path(args.log_file) if args.log_file else default_log_file(args.out)
    own_session = SparkContext._gateway is None  # no JVM yet: not a caller's (a test's) Spark, to stop
    with logging_to(log_file):
        try:
            return _run_and_print(args, log_file)
        finally:
            if own_session:
                finish()  # a first local run's JVM writes the class-data archive (the log says how long it took)


def _run_and_print(args: argparse.Namespace, log_file: Path) -> int:
    try:
        summary = run(args, progress=Progress(), log_file=log_file)
    except Exception as e:
        # Spark's own errors include ValueErrors that are not about the options.
        if isinstance(e, JavaMissingError | ValueError | argparse.ArgumentTypeError) and not isinstance(
                e, PySparkException):
            log.error("%s", e)
            print(f"status-store analyze: {e}", file=sys.stderr)
            return 2
        if not isinstance(e, RunFailed):
            log.exception("the run failed")
        reason = str(e) if isinstance(e, RunFailed) else first_line(e)
        print(f"status-store analyze: failed: {reason} (log: {log_file})", file=sys.stderr)
        return 1
    print(summary_text(summary), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point for ``spark-submit status_store/analytics/job.py ...``: the options of ``status-store analyze``."""
    parser = argparse.ArgumentParser(prog="status_store/analytics/job.py", description=__doc__)
    add_arguments(parser)
    return execute(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
