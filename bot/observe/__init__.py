"""How Pacer is watched: one log pipeline (`logs`), request ids (`request_ids`) and `GET /metrics`
(`metrics`, `metrics_collector`)."""
