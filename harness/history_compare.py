"""The analytics' outputs compared, result by result: Spark's against a baseline's (pandas, DuckDB)."""

from __future__ import annotations

from typing import Any


def _frame(df: Any) -> Any:
    """A Spark or pandas result as a pandas frame with plain dtypes, sorted on every column."""
    import pandas as pd

    pdf = df.toPandas() if hasattr(df, "toPandas") else df.copy()
    for col in pdf.columns:
        dtype = pdf[col].dtype
        if pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype):
            pdf[col] = pdf[col].astype("Float64").round(3)
        else:
            pdf[col] = pdf[col].astype(object).where(pdf[col].notna(), None)
    return pdf.sort_values(list(pdf.columns)).reset_index(drop=True)


def compare(ours: Any, theirs: Any, compared: dict[str, list[str]] | None = None) -> tuple[list[str], list[str]]:
    """(agreements, disagreements) between a baseline's Results and Spark's Analysis, result by result (the
    columns of ``compared``, by default ``COMPARED``)."""
    agree, differ = [], []
    for name, columns in (compared or COMPARED).items():
        left = _frame(getattr(ours, name)[columns])
        right = _frame(getattr(theirs, name).select(*columns))
        # Empty results agree whatever dtypes each side gave their columns.
        if left.equals(right) or (left.empty and right.empty):
            agree.append(f"{name}: {len(left)} rows agree")
            continue
        diff = left.merge(right, how="outer", indicator=True).query("_merge != 'both'")
        differ.append(f"{name}: pandas {len(left)} rows, Spark {len(right)} rows; differing rows "
                      f"(left_only = pandas):\n{diff.head(20).to_string()}")
    counters = theirs.counters()
    garbled = dict(zip(ours.garbled["input"], ours.garbled["garbled"], strict=True))
    if (counters["garbled_values"], counters["history_garbled"]) == (garbled["status"], garbled["history"]):
        agree.append(f"garbled records: {garbled} agree")
    else:
        differ.append(f"garbled records: pandas {garbled}, Spark {counters}")
    return agree, differ


# Result -> the columns compared (both sides name them alike). Latency percentiles are left out:
# Spark's are approximate (percentile_approx), pandas' exact.
ENTITY = ["kind", "connector", "task"]


COMPARED: dict[str, list[str]] = {
    "latest": ["key", "kind", "connector", "task", "state", "worker_id", "generation"],
    "state_durations": ["date", *ENTITY, "state", "duration_ms"],
    "episodes": ["date", *ENTITY, "failed_ms", "recovered_ms", "time_to_recovery_ms"],
    "mttr": [*ENTITY, "failed_episodes", "recovered", "unrecovered", "mttr_ms", "last_failed_ms"],
    "flapping": ["date", *ENTITY, "max_transitions_in_window", "flapping_transitions", "first_flapping_ms",
                 "last_flapping_ms"],
    "retry_outcomes": ["date", "kind", "result", "count", "mean_attempts", "max_attempts", "with_error"],
}
