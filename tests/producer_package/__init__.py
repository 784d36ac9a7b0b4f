"""The producer distribution under each Python it supports, and the example image."""
