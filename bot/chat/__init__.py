"""The handlers every chat surface shares: Slack's `/pacer`, its buttons and App Home, GitHub's
`/pacer` comments, the console and the REST API hand `answers.answer` an actor and a line of text.
The handlers (`reading`, `steering`, `holding`, `changing`, `running`) take a `context.Context` and
give back an `Answer`; `roles` says who may run what; `queue_view` and `gate_view` are the read
models the lists and the gate card are drawn from."""
