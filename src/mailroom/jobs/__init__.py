"""Jobs: queues, tasks, the watch supervisor and the leases that coordinate it."""
