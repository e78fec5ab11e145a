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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

# Absolute imports: spark-submit runs this file as a script (the package must be importable: installed,
# or shipped with --py-files).
from status_store.analytics.analysis import Analysis, analyze
from status_store.analytics.console import Progress, default_log_file, logging_to
from status_store.analytics.options import add_arguments, parse_settings
from status_store.analytics.outputs import CHECKPOINT, STATE_DIR, Checkpoint, OutputDir
from status_store.analytics.records import RAW_SCHEMA, Plan, ReadProblem, plan_ranges, read_files, read_ranges
from status_store.analytics.report import write_report
from status_store.analytics.session import JavaMissingError, get_session, master_of

log = logging.getLogger(__name__)

#: Where the report goes when ``--out`` is not a local directory.
LOCAL_REPORT = Path("status-store-report")


class RunFailed(Exception):
    """The input could not be read as asked; the run wrote nothing."""


@dataclass
class Inputs:
    """What the analysis reads, and what the run keeps for the next one."""

    status: DataFrame
    history: DataFrame
    #: The records this run read (kept for the next incremental run).
    read: DataFrame
    warnings: list[ReadProblem] = field(default_factory=list)
    kafka_ranges: dict[str, int] = field(default_factory=dict)
    next_offsets: dict[str, dict[int, int]] = field(default_factory=dict)
    persisted: list[DataFrame] = field(default_factory=list)


def run(args: argparse.Namespace, spark: SparkSession | None = None, progress: Progress | None = None,
        log_file: Path | None = None) -> dict[str, Any]:
    """Run the job for parsed options; returns the summary (also ``<out>/summary.json``)."""
    if (args.files is None) == (args.bootstrap_servers is None):
        raise ValueError("give either --bootstrap-servers (read the topics from Kafka) or --files, not both")
    progress = progress or Progress()
    conf = parse_settings(args.conf, "--conf")
    consumer = ({"bootstrap.servers": args.bootstrap_servers, **parse_settings(args.kafka, "--kafka")}
                if args.bootstrap_servers is not None else {})
    if spark is None:
        progress.phase(f"starting Spark ({master_of(conf)})" + (f"; its log: {log_file}" if log_file else ""))
        spark = get_session(conf, jvm_log=log_file)
    out = OutputDir(spark, args.out)
    for line in out.recover():
        progress.warning(line)
    previous = _checkpoint(out, args, progress) if args.since else None
    try:
        inputs = (_kafka_inputs(spark, args, consumer, previous, progress) if consumer
                  else _file_inputs(spark, args, previous, progress))
        try:
            summary = _analyze_and_write(spark, out, args, inputs, previous, progress)
            progress.phase("done")
            return summary
        finally:
            for frame in inputs.persisted:
                frame.unpersist()
    except BaseException:
        out.discard()
        raise


def _checkpoint(out: OutputDir, args: argparse.Namespace, progress: Progress) -> Checkpoint | None:
    """The checkpoint of the earlier run at ``--since``; None (everything is read) when there is none yet."""
    since = args.since.rstrip("/")
    text = out.read_text(f"{since}/{CHECKPOINT}")
    if text is None:
        progress.warning(f"no checkpoint in {since} yet: reading everything (the next run starts where this "
                         "one ends)")
        return None
    try:
        checkpoint = Checkpoint.from_json(text, since)
    except ValueError as e:
        raise ValueError(f"--since {since}: {e}") from None
    if (checkpoint.status_topic, checkpoint.history_topic) != (args.status_topic, args.history_topic):
        raise ValueError(f"--since {since}: its checkpoint is of the topics {checkpoint.status_topic}, "
                         f"{checkpoint.history_topic}; this run reads {args.status_topic}, {args.history_topic}")
    return checkpoint


def _topics(args: argparse.Namespace) -> list[str]:
    return [args.status_topic, *([args.history_topic] if args.history_topic else [])]


def _kafka_inputs(spark: SparkSession, args: argparse.Namespace, consumer: dict[str, Any],
                  previous: Checkpoint | None, progress: Progress) -> Inputs:
    """Plan every topic (bounded by ``--timeout``), then read the ranges; any problem fails the run."""
    progress.phase(f"planning: {', '.join(_topics(args))} at {args.bootstrap_servers} (timeout {args.timeout:g} s)")
    plans: list[Plan] = []
    for topic in _topics(args):
        start = previous.offsets.get(topic) if previous is not None else None
        plan = plan_ranges(consumer, topic, args.max_records_per_range, args.timeout, start)
        _fail_on(plan.problems)
        plans.append(plan)
    ranges = [r for plan in plans for r in plan.ranges]
    progress.phase(f"reading {len(ranges)} ranges, up to {sum(p.records for p in plans):,} records"
                   + (" after the checkpoint" if previous is not None else ""))
    frames, persisted, warnings = [], [], []
    try:
        for plan in plans:
            records = read_ranges(spark, consumer, plan.ranges, args.range_timeout)
            if records.persisted is not None:
                persisted.append(records.persisted)
            _fail_on(records.problems)
            frames.append(records.frame)
            warnings += plan.warnings
            if not plan.ranges and not (previous is not None and previous.offsets.get(plan.topic)):
                warnings.append(ReadProblem(plan.topic, "empty: no records"))
    except BaseException:
        for frame in persisted:
            frame.unpersist()
        raise
    read = _union(frames)
    status, history = _by_topic(args, _union([_kept(spark, previous), read]))
    next_offsets = {plan.topic: {**(previous.offsets.get(plan.topic, {}) if previous is not None else {}),
                                 **plan.next_offsets} for plan in plans}
    return Inputs(status, history, read, warnings, {plan.topic: len(plan.ranges) for plan in plans}, next_offsets,
                  persisted)


def _file_inputs(spark: SparkSession, args: argparse.Namespace, previous: Checkpoint | None,
                 progress: Progress) -> Inputs:
    """The exported records of the two topics (each once, with what earlier runs kept); a missing file fails
    the run, records of other topics are a warning."""
    progress.phase(f"reading {len(args.files)} file path(s)")
    records = read_files(spark, args.files)
    _fail_on(records.problems)
    topics = _topics(args)
    read = records.frame.filter(F.col("topic").isin(topics))
    warnings = []
    others = records.frame.filter(~F.col("topic").isin(topics) | F.col("topic").isNull()).count()
    if others:
        warnings.append(ReadProblem("files", f"{others} record(s) of other topics than {', '.join(topics)} ignored"))
    combined = _union([_kept(spark, previous), read])
    if previous is not None:
        # Files exported again overlap what earlier runs kept: each record once.
        combined = combined.dropDuplicates(["topic", "partition", "offset"])
    status, history = _by_topic(args, combined)
    return Inputs(status, history, read, warnings, next_offsets=previous.offsets if previous is not None else {})


def _fail_on(problems: list[ReadProblem]) -> None:
    """Fail the run on the first problem (all of them go to the log)."""
    for problem in problems:
        log.error("input problem: %s", problem)
    if problems:
        more = f" (and {len(problems) - 1} more in the log)" if len(problems) > 1 else ""
        raise RunFailed(f"{problems[0]}{more}")


def _kept(spark: SparkSession, previous: Checkpoint | None) -> DataFrame:
    """The raw records earlier incremental runs read."""
    if previous is None or not previous.batches:
        return spark.createDataFrame([], RAW_SCHEMA)
    return spark.read.schema(RAW_SCHEMA).parquet(*previous.batches)


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
    if args.since is not None:
        # Kept for the next run, from the records as read (before they are unpersisted).
        inputs.read.write.parquet(out.staged(_batch(out)))
    progress.phase("analysing")
    analysis = analyze(inputs.status, inputs.history, as_of_ms=args.as_of, flap_transitions=args.flap_transitions,
                       flap_window_ms=args.flap_window_ms)
    try:
        counters = analysis.counters()  # reads every input record once: the parsed inputs are cached from here on
        for frame in inputs.persisted:
            frame.unpersist()
        progress.phase(f"writing {args.out} ({counters['status_records']:,} status and "
                       f"{counters['history_records']:,} history records analysed)")
        return _write(spark, out, args, analysis, inputs, previous)
    finally:
        analysis.unpersist()


def _write(spark: SparkSession, out: OutputDir, args: argparse.Namespace, analysis: Analysis, inputs: Inputs,
           previous: Checkpoint | None) -> dict[str, Any]:
    """Stage every output, the state for the next run, the report and the summary, then commit them."""
    analysis.write_outputs(out.staging)
    items = out.partition_items(analysis.outputs())
    notes: dict[str, Any] = {"out": args.out, "spark_master": spark.sparkContext.master,
                             "warnings": [str(warning) for warning in inputs.warnings]}
    if inputs.kafka_ranges:
        notes["kafka_ranges"] = inputs.kafka_ranges
    if args.since is not None:
        checkpoint = Checkpoint(args.status_topic, args.history_topic, inputs.next_offsets,
                                list(previous.batches) if previous is not None else [])
        items.append(_batch(out))
        checkpoint.batches.append(f"{out.out}/{_batch(out)}")
        out.write_text(out.staged(CHECKPOINT), checkpoint.to_json(out.out))
        items.append(CHECKPOINT)
        notes["checkpoint"] = f"{out.out}/{CHECKPOINT}"
    if not args.no_report:
        local = "://" not in args.out
        directory = Path(out.staged("report")) if local else LOCAL_REPORT
        report = write_report(analysis, directory, inputs.warnings)
        notes["report"] = str(Path(args.out) / "report" / report.name) if local else str(report)
        if local:
            items.append("report")
    summary = analysis.summary(notes)
    out.write_text(out.staged("summary.json"), json.dumps(summary, indent=2, sort_keys=True) + "\n")
    out.commit([*items, "summary.json"])
    return summary


def _batch(out: OutputDir) -> str:
    """Where this run keeps the records it read, under ``--out``."""
    return f"{STATE_DIR}/records/{out.run_id}"


def summary_text(summary: dict[str, Any]) -> str:
    """The summary for a terminal."""
    lines = [f"Outputs in {summary['out']}" + (f"; report: {summary['report']}" if "report" in summary else "")]
    lines += [f"  {name}: {value}" for name, value in sorted(summary["counters"].items())]
    lines += [f"  warning: {warning}" for warning in summary["warnings"]]
    return "\n".join(lines)


def execute(args: argparse.Namespace) -> int:
    """Run the job for parsed options and print the summary. Exit codes: 0 done (perhaps with warnings),
    1 the run failed (nothing written), 2 bad options or no Java."""
    log_file = Path(args.log_file) if args.log_file else default_log_file(args.out)
    with logging_to(log_file):
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
            reason = str(e) if isinstance(e, RunFailed) else _first_line(e)
            print(f"status-store analyze: failed: {reason} (log: {log_file})", file=sys.stderr)
            return 1
    print(summary_text(summary))
    return 0


def _first_line(error: Exception) -> str:
    """An exception in one line (Spark's can be pages long): for an error in the JVM, its root cause."""
    java = getattr(error, "java_exception", None)
    if java is not None:
        while java.getCause() is not None:
            java = java.getCause()
        text = str(java.toString())
    else:
        text = f"{type(error).__name__}: {error}"
    return (text.strip().splitlines() or [type(error).__name__])[0][:500]


def main(argv: list[str] | None = None) -> int:
    """Entry point for ``spark-submit status_store/analytics/job.py ...``: the options of ``status-store analyze``."""
    parser = argparse.ArgumentParser(prog="status_store/analytics/job.py", description=__doc__)
    add_arguments(parser)
    return execute(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
