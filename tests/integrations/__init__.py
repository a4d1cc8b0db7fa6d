"""The adapters under integrations/: runners, custody, workspaces, quota sources, queues."""
