"""The analytics job: read the inputs, analyze, write Parquet outputs and the report.

Runs as ``status-store analyze ...`` (an embedded ``local[*]`` Spark unless a master is configured)
and unchanged as ``spark-submit status_store/analytics/job.py ...`` on a cluster, where spark-submit
gives the master, memory and every other setting. Bad or partial input (a garbled record, a missing
topic or partition, an empty topic, a range not read in time) is reported, never fatal.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

# Absolute imports: spark-submit runs this file as a script (the package must be importable: installed,
# or shipped with --py-files).
from status_store.analytics.analysis import analyze
from status_store.analytics.options import add_arguments, parse_settings
from status_store.analytics.records import RAW_SCHEMA, ReadProblem, Records, read_files, read_kafka
from status_store.analytics.report import write_report
from status_store.analytics.session import JavaMissingError, get_session


def run(args: argparse.Namespace, spark: SparkSession | None = None) -> dict[str, Any]:
    """Run the job for parsed options; returns the summary (also in ``<out>/summary.json`` for local outputs)."""
    if (args.files is None) == (args.bootstrap_servers is None):
        raise ValueError("give either --bootstrap-servers (read the topics from Kafka) or --files, not both")
    spark = spark or get_session(parse_settings(args.conf, "--conf"))
    ranges: dict[str, int] = {}
    status, history, problems, persisted = _inputs(spark, args, ranges)
    try:
        analysis = analyze(status, history, as_of_ms=args.as_of, flap_transitions=args.flap_transitions,
                           flap_window_ms=args.flap_window_ms)
        analysis.counters()  # reads every input record once: the parsed inputs are cached from here on
        for frame in persisted:
            frame.unpersist()
        try:
            summary = analysis.write(args.out, {"out": args.out, "kafka_ranges": ranges,
                                                "problems": [str(problem) for problem in problems]})
            if not args.no_report:
                summary["report"] = str(write_report(analysis, args.out, problems))
            return summary
        finally:
            analysis.unpersist()
    finally:
        for frame in persisted:
            frame.unpersist()


def _inputs(spark: SparkSession, args: argparse.Namespace,
            ranges: dict[str, int]) -> tuple[DataFrame, DataFrame, list[ReadProblem], list[DataFrame]]:
    """The status and history records, the problems, and the frames persisted for them (records read from
    Kafka are kept: the analysis must not read the topics twice); ``ranges`` gets the ranges per topic."""
    problems: list[ReadProblem] = []
    persisted: list[DataFrame] = []
    empty = spark.createDataFrame([], RAW_SCHEMA)
    if args.files is not None:
        records = read_files(spark, args.files)
        problems.extend(records.problems)
        frame = records.frame
        status = frame.filter(F.col("topic") == args.status_topic)
        history = frame.filter(F.col("topic") == args.history_topic) if args.history_topic else empty
        topics = [args.status_topic, *([args.history_topic] if args.history_topic else [])]
        others = frame.filter(~F.col("topic").isin(topics) | F.col("topic").isNull()).count()
        if others:
            problems.append(ReadProblem("files", f"{others} record(s) of other topics than {', '.join(topics)} "
                                                 "ignored"))
        return status, history, problems, persisted
    consumer = {"bootstrap.servers": args.bootstrap_servers, **parse_settings(args.kafka, "--kafka")}

    def topic(name: str) -> DataFrame:
        records: Records = read_kafka(spark, consumer, name, args.max_records_per_range, args.range_timeout)
        problems.extend(records.problems)
        ranges[name] = len(records.ranges)
        if records.persisted is not None:
            persisted.append(records.persisted)
        if not records.ranges:
            problems.append(ReadProblem(name, "empty: no records"))
        return records.frame

    status = topic(args.status_topic)
    history = topic(args.history_topic) if args.history_topic else empty
    return status, history, problems, persisted


def summary_text(summary: dict[str, Any]) -> str:
    """The summary for a terminal."""
    lines = [f"Outputs in {summary['out']}" + (f"; report: {summary['report']}" if "report" in summary else "")]
    lines += [f"  {name}: {value}" for name, value in sorted(summary["counters"].items())]
    lines += [f"  problem: {problem}" for problem in summary["problems"]]
    return "\n".join(lines)


def execute(args: argparse.Namespace) -> int:
    """Run the job for parsed options and print the summary; 2 for bad options or no Java."""
    try:
        summary = run(args)
    except (JavaMissingError, ValueError, argparse.ArgumentTypeError) as e:
        print(f"status-store analyze: {e}", file=sys.stderr)
        return 2
    print(summary_text(summary))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point for ``spark-submit status_store/analytics/job.py ...``: the options of ``status-store analyze``."""
    parser = argparse.ArgumentParser(prog="status_store/analytics/job.py", description=__doc__)
    add_arguments(parser)
    return execute(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
