"""What a process is built from, below every surface: the composition root (`process`: settings,
database, clock, deferrer, workers and the scheduler's Context), the outbound adapters built from the
settings (`adapters`), the notifier chain (`notify`) and the notifiers a process joins to it
(`notices`), the scheduler's leader (`leader`), the graceful stop (`drain`) and the bounded request
body the edges share (`http_body`). It imports no surface."""
