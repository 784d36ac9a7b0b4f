"""`python -m hangwatch_lab.kafkajars [VERSION ...]`: resolve the lab's Kafka jars (`main`).

A module of its own so that running it does not execute the package a second time: the
package `hangwatch_lab` imports `kafkajars` (through its Kafka engine) before `-m` would
run it, which made Python warn about "unpredictable behaviour" on every setup.
"""

from __future__ import annotations

import sys

from hangwatch_lab.kafkajars import main

sys.exit(main())
