"""The rules: pure functions over plain values — the gate and its snapshot, the explanation of a
decision, the hold ladder, the failure policy, precedence, genesis and class resolution, cycling,
the top-up rule, calibration, the burn table, the account pool, the waiting reasons and the
window arithmetic. Nothing from the database is in their import closure
(`tests/system/test_architecture.py`): the layers above read the rows and pass the values in.
"""
