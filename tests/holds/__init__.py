"""Every admission check that holds a session, one file a hold."""
