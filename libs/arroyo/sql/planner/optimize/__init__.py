"""Rewrites that exist only for speed, mostly Nexmark's: a reader can skip this package.

Each gives the rows the plain plan gives, and where one does not apply (it returns None) the
plain plan is what runs:

- ``interval_join``: Arroyo's interval join in place of Spark's join of two streams (q4, q9);
- ``fused_changes``: an aggregate over an updating aggregate in one query, in place of a stage
  between two (q4);
- ``window_local``: a join of windowed views of one windowed aggregate, per micro-batch (q5,
  q7), whose root may be ``top_rows`` (q7) or Arroyo's ``window_aggregate`` (q5).

Two of them lift a limit of the plain plan besides: a stage has one reader (see
plan.stages.stage_writers), and neither an interval join nor fused changes go through one.
"""
