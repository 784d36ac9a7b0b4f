"""`python -m hangwatch_pipeline.kafka_telemetry`: build (once) and print the jar's path."""

import sys

from hangwatch_pipeline.kafka_telemetry import main

sys.exit(main())
