"""The run report: a run's record kept as JSON lines, rebuilt into HTML and PNG timelines.

`records` is the record's format and reader, `recorder` writes it while a run goes on,
`figures` draws one scenario's timeline, `page` lays out the HTML, `writing` turns a
kept directory into its report, and `report_cli` is `hangwatch report DIR`. The demo
and the benchmarks that replay faults record through the same `Recorder`.
"""
