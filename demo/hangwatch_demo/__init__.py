"""The seed-failure scenarios and `hangwatch demo` that replays them.

`scenarios` describes each incident of docs/incidents.md as a fault to inject into
the lab, a workload to run (real producer processes using the hangwatch wrapper),
and the verdict hangwatch must reach within a bound. `harness` runs one scenario
end to end with a real sidecar loop; the sidecar scenario tests, the detection
benchmark and the demo all use it, so what is tested is what is shown.
"""
