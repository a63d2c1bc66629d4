"""Recovery metrics, aggregation across seeds, plots and reports."""
