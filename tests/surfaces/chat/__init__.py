"""The one chat handler behind Slack, GitHub and the console, and its grammar."""
