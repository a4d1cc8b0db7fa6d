"""The processes at the top: `pacer serve` (`server`, the ASGI `app`, the bounds on slow clients
in `slow_clients`, the `--demo` feed in `demo`) and `pacer worker` (`worker`, `worker_notices`)."""
