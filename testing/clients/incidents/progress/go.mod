module hangwatch.dev/incidents/progress

go 1.19
