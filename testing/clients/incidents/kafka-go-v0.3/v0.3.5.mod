module hangwatch.dev/incidents/kafka-go-v0.3

go 1.19

require github.com/segmentio/kafka-go v0.3.5

require hangwatch.dev/incidents/progress v0.0.0

replace hangwatch.dev/incidents/progress => ../progress
