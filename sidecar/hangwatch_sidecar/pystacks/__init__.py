"""The Python stack view: which of the executor's Python threads is inside a Kafka client,
read with py-spy from a neighbour container (a pod's shared process namespace)."""
