"""GitHub: signed deliveries, intake, comments, against a fake REST API."""
