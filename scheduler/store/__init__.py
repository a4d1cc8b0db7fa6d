"""The store: the tables (`models`) and their migrations, engines and transactions (`db`), the read
caches and the write counters they trust (`caches`, `versions`), and the rows the layers above
read and write by name — sessions and their class, the policy and its audit, the session view,
the preemption ledger, the declared prerequisites, and the reads every decision repeats (the hold
stores, the running fleet and spend, the triggers' limits and watched states), cached here and
nowhere else.
"""
