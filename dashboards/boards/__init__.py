"""The pieces of `dashboards/build.py`: Grafana building blocks (`blocks`), PromQL
selectors and fragments (`promql`), the shared cost panels (`cost_by`), variables, the
grid layout (`layout`) and one module per dashboard (`fleet`, `cost`, `gpu`, `slurm`)."""
