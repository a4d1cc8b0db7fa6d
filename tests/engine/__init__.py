"""The turn engine: queue passes, submissions, alarms, leases, recovery."""
