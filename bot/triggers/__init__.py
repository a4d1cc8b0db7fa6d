"""Triggers: what one may say (`spec`), writing them for every surface (`writes`), and
`triggers.toml`, triggers as code (`file`)."""
