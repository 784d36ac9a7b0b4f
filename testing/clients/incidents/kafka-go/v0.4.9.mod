module hangwatch.dev/incidents/kafka-go

go 1.19

require github.com/segmentio/kafka-go v0.4.9

require hangwatch.dev/incidents/progress v0.0.0

replace hangwatch.dev/incidents/progress => ../progress

require (
	github.com/golang/snappy v0.0.1 // indirect
	github.com/klauspost/compress v1.9.8 // indirect
	github.com/pierrec/lz4 v2.0.5+incompatible // indirect
)
